#include "driver/control_plane.h"
#include "instance/config.h"
#include "config/cluster_config.h"
