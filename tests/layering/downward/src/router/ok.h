#pragma once
#include "telemetry/telemetry.h"
#include "profile/profile.h"
