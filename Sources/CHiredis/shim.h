#ifndef SIMP_CHIREDIS_SHIM_H
#define SIMP_CHIREDIS_SHIM_H
#include <hiredis/hiredis.h>
#endif
