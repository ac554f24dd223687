#pragma once
#include "trace/trace.h"
