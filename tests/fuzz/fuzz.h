/* tests/fuzz/fuzz.h - the libFuzzer entry point every target defines; fuzz_driver.c calls it when
 * the targets are built without -fsanitize=fuzzer. */
#ifndef HIDET_TESTS_FUZZ_H
#define HIDET_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* Runs the target on one input. Returns 0 (libFuzzer's convention); a bug aborts or is reported
 * by the sanitizers. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
