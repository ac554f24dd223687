#include "driver/instance_runner.h"
#include "trace/trace.h"
