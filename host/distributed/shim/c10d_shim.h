/* C ABI over PyTorch c10d (TCPStore, PrefixStore, ProcessGroupGloo/NCCL).
 *
 * Every function that can fail returns one of the SKYRL_C10D_* codes. On
 * failure it stores a NUL-terminated message, allocated with malloc, in *err
 * (when err is not NULL); the caller frees it with skyrl_c10d_free. No C++
 * exception ever leaves these functions.
 *
 * Tensors are passed as `at::Tensor*` (what tch's `Tensor::as_ptr` returns).
 */
#ifndef SKYRL_C10D_SHIM_H
#define SKYRL_C10D_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  SKYRL_C10D_OK = 0,
  SKYRL_C10D_ERR = 1,         /* any other failure */
  SKYRL_C10D_ERR_NETWORK = 2, /* c10::DistNetworkError: peer or store gone */
  SKYRL_C10D_ERR_STORE = 3,   /* c10::DistStoreError: store timeout etc. */
};

/* ReduceOp codes. */
enum { SKYRL_OP_SUM = 0, SKYRL_OP_MAX = 1, SKYRL_OP_MIN = 2, SKYRL_OP_AVG = 3 };

/* Backend codes. */
enum { SKYRL_BACKEND_GLOO = 0, SKYRL_BACKEND_NCCL = 1 };

typedef struct skyrl_store skyrl_store;
typedef struct skyrl_pg skyrl_pg;

/* Frees a message or buffer allocated by the shim. NULL is fine. */
void skyrl_c10d_free(void* ptr);

/* Whether the shim was compiled with ProcessGroupNCCL. */
int skyrl_c10d_has_nccl(void);

/* TCPStore: the server when is_server != 0, else a client. world_size > 0
 * makes the server wait (up to timeout_ms) until that many clients joined. */
int skyrl_store_tcp(const char* host, uint16_t port, int world_size, int is_server,
                    int64_t timeout_ms, skyrl_store** out, char** err);
/* PrefixStore(prefix, inner); inner stays owned by the caller. */
int skyrl_store_prefix(skyrl_store* inner, const char* prefix, skyrl_store** out,
                       char** err);
/* A new connection to the same server (with the same prefixes). */
int skyrl_store_clone(skyrl_store* store, skyrl_store** out, char** err);
int skyrl_store_set_timeout(skyrl_store* store, int64_t timeout_ms, char** err);
/* Actual port of a TCPStore (the bound one when created with port 0). */
int skyrl_store_port(skyrl_store* store, uint16_t* port, char** err);
int skyrl_store_set(skyrl_store* store, const char* key, const uint8_t* data,
                    size_t len, char** err);
/* Blocks until the key exists or the store timeout passes. *data is freed
 * with skyrl_c10d_free. */
int skyrl_store_get(skyrl_store* store, const char* key, uint8_t** data,
                    size_t* len, char** err);
int skyrl_store_add(skyrl_store* store, const char* key, int64_t delta,
                    int64_t* out, char** err);
int skyrl_store_check(skyrl_store* store, const char* const* keys, size_t n,
                      int* out, char** err);
void skyrl_store_free(skyrl_store* store);

/* ProcessGroupGloo. ifnames: comma-separated interfaces (GLOO_SOCKET_IFNAME)
 * or NULL; else hostname: the address to bind, or NULL for
 * createDefaultDevice. */
int skyrl_pg_gloo(skyrl_store* store, int rank, int size, int64_t timeout_ms,
                  const char* ifnames, const char* hostname, skyrl_pg** out,
                  char** err);
/* ProcessGroupNCCL (fails when the shim was built without NCCL). */
int skyrl_pg_nccl(skyrl_store* store, int rank, int size, int64_t timeout_ms,
                  skyrl_pg** out, char** err);

/* Blocking collectives. */
int skyrl_pg_allreduce(skyrl_pg* pg, void* tensor, int op, char** err);
int skyrl_pg_reduce_scatter(skyrl_pg* pg, void* output, const void* input, int op,
                            char** err);
int skyrl_pg_allgather(skyrl_pg* pg, void* output, const void* input, char** err);
int skyrl_pg_broadcast(skyrl_pg* pg, void* tensor, int root, char** err);
int skyrl_pg_barrier(skyrl_pg* pg, char** err);

/* Drops a tensor's accumulated gradient (param.grad = None in PyTorch), so a
 * sharded optimizer keeps only its shard. Never fails. */
void skyrl_tensor_release_grad(void* tensor);

/* Shuts the backend down (abort != 0: abort instead, for dead peers) and
 * frees it. */
void skyrl_pg_free(skyrl_pg* pg, int abort);

#ifdef __cplusplus
}
#endif

#endif
