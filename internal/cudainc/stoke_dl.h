/*
 * stoke_dl.h: a CUDA library that a -tags cuda binary loads at run time instead of linking it, so
 * that the binary starts on a host without the library (and then reports which one is missing).
 *
 * A package declares the functions it and its dependencies call (gorgonia.org/cu's included) and
 * expands STOKE_DL_LIBRARY once, in a .c file of its own:
 *
 *	#define NCCL_SYMBOLS(X, lib) X(lib, ncclGetUniqueId) X(lib, ncclCommInitRank) ...
 *	STOKE_DL_LIBRARY(nccl, NCCL_SYMBOLS, 1, 2)
 *
 * For each function that defines a trampoline of the function's own name (hidden: it satisfies the
 * calls of this binary at link time and never interposes another library's) that jumps through a
 * slot; the slot starts at a stub returning MISSING (the library's status for "not available"),
 * and stoke_dl_load_LIB(soname, err, n) dlopens the library and points each slot at its function.
 * With REQUIRED, a library lacking any of the functions is refused (nothing is pointed at it and
 * err names the first missing function); otherwise missing functions keep the stub, which is what
 * the driver needs: gorgonia.org/cu references its whole API and the CPU stand-in of
 * internal/cudainc/sim defines only what Stoke calls. No CUDA symbol is left for the dynamic
 * loader to resolve, so the binary has no DT_NEEDED entry for the library (the link passes
 * --as-needed, for the -l flags of gorgonia.org/cu) and does not depend on lazy binding:
 * LD_BIND_NOW and -z now change nothing.
 *
 * The functions all return a status code (a missing one returns MISSING), except two that return a
 * string (ncclGetErrorString, ncclGetLastError); NCCL is loaded with REQUIRED, so they are never
 * reached through the stub once it is loaded, and Stoke calls none of its functions before.
 */
#ifndef STOKE_DL_H
#define STOKE_DL_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>

#if defined(__x86_64__)
#define STOKE_DL_JUMP(name) "\tjmp *stoke_dl_slot_" #name "(%rip)\n"
#elif defined(__aarch64__)
#define STOKE_DL_JUMP(name) \
	"\tadrp x16, stoke_dl_slot_" #name "\n\tldr x16, [x16, #:lo12:stoke_dl_slot_" #name "]\n\tbr x16\n"
#else
#error "stoke_dl.h: the CUDA trampolines exist for x86-64 and arm64"
#endif

#define STOKE_DL_SLOT(lib, name) \
	__attribute__((visibility("hidden"), used)) void *stoke_dl_slot_##name = (void *)stoke_dl_missing_##lib;
#define STOKE_DL_TRAMPOLINE(lib, name)                                                                      \
	__asm__(".pushsection .text\n.globl " #name "\n.hidden " #name "\n.type " #name ", %function\n.p2align 4\n" #name ":\n" \
		STOKE_DL_JUMP(name) ".size " #name ", .-" #name "\n.popsection\n");
#define STOKE_DL_ENTRY(lib, name) {#name, &stoke_dl_slot_##name},

#define STOKE_DL_LIBRARY(lib, SYMBOLS, REQUIRED, MISSING)                                                          \
	static int stoke_dl_missing_##lib(void) { return (MISSING); }                                              \
	SYMBOLS(STOKE_DL_SLOT, lib)                                                                                  \
	SYMBOLS(STOKE_DL_TRAMPOLINE, lib)                                                                            \
	static const struct {                                                                                        \
		const char *name;                                                                                      \
		void **slot;                                                                                           \
	} stoke_dl_table_##lib[] = {SYMBOLS(STOKE_DL_ENTRY, lib)};                                                 \
	/* stoke_dl_load_LIB returns 0, or -1 with the reason in err. Call it once, before any of the functions. */ \
	__attribute__((visibility("hidden"))) int stoke_dl_load_##lib(const char *soname, char *err, size_t n) {                                  \
		enum { count = sizeof stoke_dl_table_##lib / sizeof stoke_dl_table_##lib[0] };                         \
		void *fn[count];                                                                                       \
		void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);                                                       \
		if (h == NULL) {                                                                                       \
			snprintf(err, n, "%s", dlerror());                                                             \
			return -1;                                                                                     \
		}                                                                                                      \
		for (int i = 0; i < count; i++) {                                                                      \
			fn[i] = dlsym(h, stoke_dl_table_##lib[i].name);                                                \
			if (fn[i] == NULL && (REQUIRED)) {                                                             \
				snprintf(err, n, "%s has no function %s", soname, stoke_dl_table_##lib[i].name);       \
				dlclose(h);                                                                            \
				return -1;                                                                             \
			}                                                                                              \
		}                                                                                                      \
		for (int i = 0; i < count; i++)                                                                        \
			if (fn[i] != NULL) *stoke_dl_table_##lib[i].slot = fn[i];                                      \
		return 0;                                                                                              \
	}

#endif /* STOKE_DL_H */
