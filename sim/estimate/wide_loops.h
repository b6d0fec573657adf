#pragma once

// Loops that run over every rank or pair of a large form (a pairwise
// exchange followed rank by rank: a million rank steps a point; the
// relation codes of a thousand shifts' pairs) are built twice, for AVX2
// (four doubles or eight ints a vector) and for the baseline x86-64 (two
// or four), the machine's picked when the program loads. AVX2 without FMA
// rounds every operation as the baseline does, so the results are the same
// to the bit. Only with the speed tricks (CMake HCCLSIM_SPEED_TRICKS);
// elsewhere, under clang and in the sanitized fuzzing build, one plain
// version.
#if defined(HCCLSIM_SPEED_TRICKS) && defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define WIDE_LOOPS __attribute__((target_clones("avx2", "default")))
#else
#define WIDE_LOOPS
#endif
