#pragma once
#include "core/time.h"
