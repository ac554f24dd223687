#include "driver/instance_runner.h"
#include "sim/replay.h"
