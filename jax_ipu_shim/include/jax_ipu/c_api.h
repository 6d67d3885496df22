/* The C boundary of libjax_ipu.so: every JaxIpu_* function the Python package calls through ctypes, and the one
 * export macro. PJRT's own entry point, GetPjrtApi, is defined per API version in pjrt/tables/.
 *
 * The ctypes signature of each function is in jax_ipu/_native.py (SIGNATURES, the one Python table of them);
 * tests/backend/test_c_api.py checks that this header, that table and the library's exports agree.
 *
 * Rules of the boundary: no C++ exception crosses it (a failure is a return code, a NULL, or a message in *error);
 * every char* a function returns, or stores in *error, is malloc'd: free it with JaxIpu_FreeString. */
#ifndef JAX_IPU_C_API_H_
#define JAX_IPU_C_API_H_

#include <stddef.h>
#include <stdint.h>

/* Marks a function the library exports (pjrt/exports.map lets GetPjrtApi and JaxIpu_* through, nothing else). */
#define JAX_IPU_EXPORT __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The emulator (emulator/src/capi.cc) ------------------------------------------------------------------- */

/* The device description of an IPU Model, as JSON; NULL and *error on failure. `model` is a JSON object of its
 * parameters (ipu::ModelParameters: {"version": "ipu21", "num_tiles": 16, "memory_bytes_per_tile": ...}, any
 * subset; NULL or "": an ipu2 with every tile). */
JAX_IPU_EXPORT char* JaxIpu_DeviceInfo(const char* model, char** error);
/* Compiles a program (the front end's binary container or JSON text, `size` bytes) for that IPU Model with compile
 * `options` (JSON: {"fusion": bool, "exchange_per_element": bool, "allow_out_of_memory": bool}, any subset; NULL or
 * "": the defaults): an executable handle, or NULL and *error. */
JAX_IPU_EXPORT void* JaxIpu_Compile(const char* program, size_t size, const char* model, const char* options,
                                    char** error);
/* JSON: inputs, outputs (dtype, shape), memory (per-tile bytes summary, worst tile), static cycle estimate; NULL on
 * failure. */
JAX_IPU_EXPORT char* JaxIpu_ExecutableInfo(void* executable);
/* The graph part of a profile report (Executable::profileJson); NULL on failure. */
JAX_IPU_EXPORT char* JaxIpu_ExecutableProfile(void* executable);
/* Runs the executable on host buffers, one per parameter and one per result: 0, or nonzero and *error. */
JAX_IPU_EXPORT int JaxIpu_Run(void* executable, const void* const* inputs, void* const* outputs, char** error);
/* The profile of the executable's last run (cycles per step), as JSON; NULL before the first run. */
JAX_IPU_EXPORT char* JaxIpu_LastRunProfile(void* executable);
JAX_IPU_EXPORT void JaxIpu_Destroy(void* executable);
/* The op registry (registryJson): the compiler front end learns the ops, families and dtypes from here. */
JAX_IPU_EXPORT char* JaxIpu_OpRegistry(void);
/* The library's identity: a hash of what it was linked from (its objects, named by the hashes of their sources, the
 * link command and the exports), which the build writes into a generated source of its own
 * (build_tools/native.py). The executable cache keys on it instead of hashing the library's bytes. */
JAX_IPU_EXPORT char* JaxIpu_BuildId(void);
/* The host timeline (PVTI_OPTIONS): switch it on or off; take the spans recorded so far (JSON, see trace.h). */
JAX_IPU_EXPORT void JaxIpu_TraceEnable(int on);
JAX_IPU_EXPORT char* JaxIpu_TraceTake(void);
JAX_IPU_EXPORT void JaxIpu_FreeString(char* s);

/* ---- The PJRT plugin (pjrt/) ----------------------------------------------------------------------------- */

/* The compiler jaxlib's PJRT_Client_Compile calls (jax_ipu/backend/plugin.py): it turns a StableHLO module and
 * serialized CompileOptions into a program and reports through the JaxIpu_CompileResult_* functions on `result`;
 * returns 0. */
typedef int (*JaxIpu_CompilerFn)(const char* module, size_t module_size, const char* options, size_t options_size,
                                 void* result);
JAX_IPU_EXPORT void JaxIpu_SetCompiler(JaxIpu_CompilerFn compiler);
/* The emulator's compile options for this program (JSON, as JaxIpu_Compile's `options`). */
JAX_IPU_EXPORT void JaxIpu_CompileResult_SetOptions(void* result, const char* options, size_t size);
/* The program as the front end wrote it: the binary container (program.cc) or JSON text. */
JAX_IPU_EXPORT void JaxIpu_CompileResult_SetProgram(void* result, const char* program, size_t size);
/* A compile error: a PJRT_Error_Code (INTERNAL if out of range) and its message. */
JAX_IPU_EXPORT void JaxIpu_CompileResult_SetError(void* result, int code, const char* message, size_t size);
/* One device of the program's device assignment, in order. */
JAX_IPU_EXPORT void JaxIpu_CompileResult_AddDevice(void* result, int device_id);
/* Called when PJRT_Client_Compile has lowered a program the front end wrote (jax_ipu.report's graph profile comes
 * from the executable PJRT runs, not from a second lowering): a handle of the hook's own on that executable, which
 * it releases with JaxIpu_Destroy; the program; the devices it was compiled for. The hook must not fail. */
typedef void (*JaxIpu_CompiledFn)(void* executable, const char* program, size_t size, const int* device_ids,
                                  size_t num_devices);
JAX_IPU_EXPORT void JaxIpu_SetCompiledHook(JaxIpu_CompiledFn hook);

/* Host callbacks (jax.pure_callback, io_callback, debug.print): called on a device's callback thread for each
 * HostCall step of a run, with the callback `id`, its operands and its result buffers. Returns 0, or nonzero after
 * writing a NUL-terminated message (at most error_size bytes) into `error`, which fails the run with it. */
typedef int (*JaxIpu_HostCallbackFn)(int64_t id, size_t num_in, const void* const* in, size_t num_out, void* const* out,
                                     char* error, size_t error_size);
JAX_IPU_EXPORT void JaxIpu_SetHostCallback(JaxIpu_HostCallbackFn fn);
/* Appends one infeed entry to device `device_id` of the current client: n arrays, each with a dtype name ("bool",
 * "f16", "f32", "i32", "u32"), rank, dims, and dense row-major bytes, copied before returning. 0 on success; else
 * nonzero and *error. */
JAX_IPU_EXPORT int JaxIpu_InfeedPush(int device_id, size_t n, const char* const* dtypes, const int* ranks,
                                     const int64_t* const* dims, const void* const* data, char** error);
/* Takes the oldest outfeed entry of the device, blocking until there is one. Its arrays must match the n described;
 * they are copied into data[i]. Nonzero and *error if the types differ (the entry stays queued), if
 * timeout_seconds >= 0 passes first, when the queue is empty and no program that outfeeds is queued or running on
 * the device, so nothing could ever arrive (never a hang), or when a Ctrl-C (SIGINT) ends the wait. */
JAX_IPU_EXPORT int JaxIpu_OutfeedPop(int device_id, size_t n, const char* const* dtypes, const int* ranks,
                                     const int64_t* const* dims, void* const* data, double timeout_seconds,
                                     char** error);
/* At exit: a run waiting on an empty infeed, now or later, fails (nothing can feed it any more); then
 * JaxIpu_Synchronize, so that queued work that calls back into Python runs while the interpreter is whole. */
JAX_IPU_EXPORT void JaxIpu_AtExit(void);
/* Blocks until every device of the current client has finished all work queued so far. */
JAX_IPU_EXPORT void JaxIpu_Synchronize(void);
/* JSON for device `device_id` of the current client, or NULL if there is no such device. */
JAX_IPU_EXPORT char* JaxIpu_DeviceStats(int device_id);
/* jax.profiler on jaxlib 0.4.13 (no PJRT profiler extension there): a session recording the IPUs' runs and host
 * transfers from now on (NULL on failure); stopping it gives its XSpace (TSL's profile format, the IPUs' planes
 * only, timestamps in wall-clock ns since origin_ns) in *xspace (*size bytes; free with JaxIpu_FreeString) and
 * frees the session. 0: ok. */
JAX_IPU_EXPORT void* JaxIpu_ProfileStart(void);
JAX_IPU_EXPORT int JaxIpu_ProfileStop(void* session, int64_t origin_ns, char** xspace, size_t* size);
/* Chains the library's SIGINT handler in front of the one installed now (Python's). 0: watching (or already), 1:
 * there is no handler to chain to (SIG_DFL ends the process, SIG_IGN ignores Ctrl-C). */
JAX_IPU_EXPORT int JaxIpu_WatchInterrupts(void);
/* 1 once per Ctrl-C (or run of them) not reported yet, and marks it reported; else 0. */
JAX_IPU_EXPORT int JaxIpu_TakeInterrupt(void);
/* Called by jax_ipu.backend.multihost before the client exists: the port the other processes connect to (0 on
 * failure). */
JAX_IPU_EXPORT int JaxIpu_TransportListen(void);
/* PJRT API 0.90 and later (the current series only): the StableHLO versions the front end reads, before jaxlib
 * loads the table; [current, minimum] as (major, minor, patch) each. */
JAX_IPU_EXPORT void JaxIpu_SetStablehloVersions(const int64_t* current, const int64_t* minimum);

#ifdef __cplusplus
}
#endif

#endif /* JAX_IPU_C_API_H_ */
