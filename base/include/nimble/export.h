/* NIMBLE_API: marks a function as part of the runtime's public C API.
 *
 * libnimble_runtime.so and libnimble_fetch.so are compiled with
 * -fvisibility=hidden, so they export exactly the functions whose
 * declarations in the installed headers carry NIMBLE_API (status.h, runtime.h,
 * executable_builder.h, bytecode.h, tensor_io.h; fetch.h for the fetcher);
 * everything else stays private to the library. tests/install checks that
 * the shared libraries' dynamic symbol tables equal the functions those
 * headers declare. Static builds and other compilers see no attribute.
 *
 * Lives beside status.h (protocol/include) because status.h is the lowest
 * installed header that needs it.
 */
#ifndef NIMBLE_EXPORT_H
#define NIMBLE_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define NIMBLE_API __attribute__((visibility("default")))
#else
#define NIMBLE_API
#endif

#endif /* NIMBLE_EXPORT_H */
