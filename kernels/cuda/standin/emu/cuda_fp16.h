/* Stands in for the CUDA header of this name on the host: emu.h has it all. */
#include "emu.h"
