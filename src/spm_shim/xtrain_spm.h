/* The C interface of libxtrain_spm.so, the one library that links SentencePiece. Debian's
   libsentencepiece exports its own bundled protobuf-lite (3.14) under the same symbol names as the
   system libprotobuf (3.21) that LibTorch and ONNX load, and a process holding both aborts. So
   xtrain never links SentencePiece: data/tokenizer dlopen()s this shim with RTLD_DEEPBIND |
   RTLD_LOCAL, which binds SentencePiece's protobuf calls to its own copy. Only C types cross. */
#ifndef XTRAIN_SPM_H_
#define XTRAIN_SPM_H_
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xspm_processor xspm_processor;
/* Receives bytes (a model, decoded text, an error message) owned by the caller of the callback. */
typedef void (*xspm_bytes_fn)(void* ctx, const char* data, size_t size);

/* Trains on the non-empty lines of `files`; options are `n_options` key/value pairs of
   SentencePiece trainer flags. The serialized model goes to `out`. 0 on success, else the error
   goes to `err`. */
int xspm_train(const char* const* files, size_t n_files, const char* const* options, size_t n_options,
               xspm_bytes_fn out, void* out_ctx, xspm_bytes_fn err, void* err_ctx);
/* NULL on failure (the message goes to `err`). */
xspm_processor* xspm_load(const char* model, size_t size, xspm_bytes_fn err, void* err_ctx);
void xspm_free(xspm_processor* p);
int xspm_piece_size(const xspm_processor* p);
int xspm_eos_id(const xspm_processor* p);
/* Writes the ids (as int32) to `out` as bytes. */
int xspm_encode(const xspm_processor* p, const char* text, size_t size, xspm_bytes_fn out, void* out_ctx,
                xspm_bytes_fn err, void* err_ctx);
int xspm_decode(const xspm_processor* p, const int32_t* ids, size_t n, xspm_bytes_fn out, void* out_ctx,
                xspm_bytes_fn err, void* err_ctx);

#ifdef __cplusplus
}
#endif
#endif
