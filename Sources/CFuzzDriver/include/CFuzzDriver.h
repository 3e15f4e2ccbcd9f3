#ifndef SIMP_CFUZZDRIVER_H
#define SIMP_CFUZZDRIVER_H
#include <stddef.h>
#include <stdint.h>

// libFuzzer's entry for programs that keep their own main (clang's libFuzzer docs,
// "Using libFuzzer as a library"). Only a fuzzing build (-sanitize=fuzzer) links it.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
