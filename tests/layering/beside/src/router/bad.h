#pragma once
#include "telemetry/telemetry.h"
#include "instance/instance.h"
