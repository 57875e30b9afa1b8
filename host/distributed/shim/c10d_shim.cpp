// Thin C ABI over PyTorch's c10d: TCPStore + PrefixStore rendezvous and the
// Gloo / NCCL process groups. See c10d_shim.h for the contract; the Rust side
// (src/ffi.rs) owns all policy (timeouts, dead-rank diagnosis, tensor checks).
#include "c10d_shim.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

struct skyrl_store {
  c10::intrusive_ptr<c10d::Store> store;
};

struct skyrl_pg {
  c10::intrusive_ptr<c10d::Backend> backend;
  int size;
  bool nccl;
  std::chrono::milliseconds timeout;
};

namespace {

char* dup_message(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p != nullptr) {
    std::memcpy(p, s.data(), s.size());
    p[s.size()] = '\0';
  }
  return p;
}

int fail(char** err, int code, const std::string& message) {
  if (err != nullptr) {
    *err = dup_message(message);
  }
  return code;
}

// Runs f; any C++ exception becomes an error code plus message.
template <class F>
int guard(char** err, F&& f) {
  try {
    f();
    return SKYRL_C10D_OK;
  } catch (const c10::DistNetworkError& e) {
    return fail(err, SKYRL_C10D_ERR_NETWORK, e.what_without_backtrace());
  } catch (const c10::DistStoreError& e) {
    return fail(err, SKYRL_C10D_ERR_STORE, e.what_without_backtrace());
  } catch (const c10::Error& e) {
    return fail(err, SKYRL_C10D_ERR, e.what_without_backtrace());
  } catch (const std::exception& e) {
    return fail(err, SKYRL_C10D_ERR, e.what());
  } catch (...) {
    return fail(err, SKYRL_C10D_ERR, "unknown C++ exception");
  }
}

std::chrono::milliseconds ms(int64_t v) {
  return std::chrono::milliseconds(v);
}

// Blocks until the work is done. Gloo's wait() blocks the CPU; NCCL's only
// does with an explicit timeout (otherwise it just orders CUDA streams).
void finish(skyrl_pg* pg, const c10::intrusive_ptr<c10d::Work>& work) {
  if (pg->nccl) {
    work->wait(pg->timeout);
  } else {
    work->wait();
  }
}

// Maps an op code to c10d's ReduceOp. Gloo has no AVG: the caller sums and
// then divides by the group size (*divide = true).
c10d::ReduceOp reduce_op(const skyrl_pg* pg, int op, const at::Tensor& t,
                         bool* divide) {
  *divide = false;
  switch (op) {
    case SKYRL_OP_SUM:
      return c10d::ReduceOp::SUM;
    case SKYRL_OP_MAX:
      return c10d::ReduceOp::MAX;
    case SKYRL_OP_MIN:
      return c10d::ReduceOp::MIN;
    case SKYRL_OP_AVG:
      TORCH_CHECK(at::isFloatingType(t.scalar_type()),
                  "ReduceOp::Avg needs a floating-point tensor, got ",
                  t.scalar_type(), "; use Sum and divide yourself");
      if (pg->nccl) {
        return c10d::ReduceOp::AVG;
      }
      *divide = true;
      return c10d::ReduceOp::SUM;
    default:
      TORCH_CHECK(false, "unknown reduce op code ", op);
  }
}

at::Tensor& tensor_ref(void* p) { return *static_cast<at::Tensor*>(p); }
at::Tensor tensor_copy(const void* p) { return *static_cast<const at::Tensor*>(p); }

}  // namespace

extern "C" {

void skyrl_c10d_free(void* ptr) { std::free(ptr); }

void skyrl_tensor_release_grad(void* tensor) {
  // Only resets a handle; no allocation, nothing that can throw.
  static_cast<at::Tensor*>(tensor)->mutable_grad() = at::Tensor();
}

int skyrl_c10d_has_nccl(void) {
#ifdef USE_C10D_NCCL
  return 1;
#else
  return 0;
#endif
}

int skyrl_store_tcp(const char* host, uint16_t port, int world_size, int is_server,
                    int64_t timeout_ms, skyrl_store** out, char** err) {
  return guard(err, [&] {
    // Same options as torch.distributed.rendezvous._create_c10d_store.
    c10d::TCPStoreOptions opts;
    opts.port = port;
    opts.isServer = is_server != 0;
    if (world_size > 0) {
      opts.numWorkers = static_cast<std::size_t>(world_size);
    }
    opts.waitWorkers = world_size > 0;
    opts.timeout = ms(timeout_ms);
    opts.multiTenant = is_server != 0;
    auto store = c10::make_intrusive<c10d::TCPStore>(std::string(host), opts);
    *out = new skyrl_store{store};
  });
}

int skyrl_store_prefix(skyrl_store* inner, const char* prefix, skyrl_store** out,
                       char** err) {
  return guard(err, [&] {
    auto store = c10::make_intrusive<c10d::PrefixStore>(std::string(prefix), inner->store);
    *out = new skyrl_store{store};
  });
}

int skyrl_store_clone(skyrl_store* store, skyrl_store** out, char** err) {
  return guard(err, [&] { *out = new skyrl_store{store->store->clone()}; });
}

int skyrl_store_set_timeout(skyrl_store* store, int64_t timeout_ms, char** err) {
  return guard(err, [&] { store->store->setTimeout(ms(timeout_ms)); });
}

int skyrl_store_port(skyrl_store* store, uint16_t* port, char** err) {
  return guard(err, [&] {
    c10::intrusive_ptr<c10d::Store> s = store->store;
    if (auto* prefix = dynamic_cast<c10d::PrefixStore*>(s.get())) {
      s = prefix->getUnderlyingNonPrefixStore();
    }
    auto* tcp = dynamic_cast<c10d::TCPStore*>(s.get());
    TORCH_CHECK(tcp != nullptr, "not a TCPStore");
    *port = tcp->getPort();
  });
}

int skyrl_store_set(skyrl_store* store, const char* key, const uint8_t* data,
                    size_t len, char** err) {
  return guard(err, [&] {
    std::vector<uint8_t> value(data, data + len);
    store->store->set(key, value);
  });
}

int skyrl_store_get(skyrl_store* store, const char* key, uint8_t** data,
                    size_t* len, char** err) {
  return guard(err, [&] {
    std::vector<uint8_t> value = store->store->get(key);
    // malloc(0) may return NULL; always hand back a freeable pointer.
    auto* buf = static_cast<uint8_t*>(std::malloc(value.size() + 1));
    TORCH_CHECK(buf != nullptr, "out of memory");
    if (!value.empty()) {
      std::memcpy(buf, value.data(), value.size());
    }
    *data = buf;
    *len = value.size();
  });
}

int skyrl_store_add(skyrl_store* store, const char* key, int64_t delta,
                    int64_t* out, char** err) {
  return guard(err, [&] { *out = store->store->add(key, delta); });
}

int skyrl_store_check(skyrl_store* store, const char* const* keys, size_t n,
                      int* out, char** err) {
  return guard(err, [&] {
    std::vector<std::string> ks(keys, keys + n);
    *out = store->store->check(ks) ? 1 : 0;
  });
}

void skyrl_store_free(skyrl_store* store) {
  try {
    delete store;
  } catch (...) {
    // A destructor that throws must not cross into Rust.
  }
}

int skyrl_pg_gloo(skyrl_store* store, int rank, int size, int64_t timeout_ms,
                  const char* ifnames, const char* hostname, skyrl_pg** out,
                  char** err) {
  return guard(err, [&] {
    // Mirrors the python ProcessGroupGloo binding (torch/csrc/distributed/c10d/init.cpp).
    auto opts = c10d::ProcessGroupGloo::Options::create(ms(timeout_ms));
    const bool lazy = c10d::getDefaultGlooLazyInit();
    if (ifnames != nullptr && *ifnames != '\0') {
      std::string list(ifnames);
      size_t start = 0;
      while (start <= list.size()) {
        size_t end = list.find(',', start);
        if (end == std::string::npos) end = list.size();
        if (end > start) {
          opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(
              list.substr(start, end - start), lazy));
        }
        start = end + 1;
      }
    } else if (hostname != nullptr && *hostname != '\0') {
      opts->devices.push_back(
          c10d::ProcessGroupGloo::createDeviceForHostname(hostname, lazy));
    } else {
      opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice(lazy));
    }
    TORCH_CHECK(!opts->devices.empty(), "no Gloo device (GLOO_SOCKET_IFNAME empty?)");
    opts->threads = static_cast<int>(opts->devices.size()) * 2;
    auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store->store, rank, size, opts);
    *out = new skyrl_pg{pg, size, false, ms(timeout_ms)};
  });
}

int skyrl_pg_nccl(skyrl_store* store, int rank, int size, int64_t timeout_ms,
                  skyrl_pg** out, char** err) {
#ifdef USE_C10D_NCCL
  return guard(err, [&] {
    auto opts = c10d::ProcessGroupNCCL::Options::create(false);
    opts->timeout = ms(timeout_ms);
    auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store->store, rank, size, opts);
    *out = new skyrl_pg{pg, size, true, ms(timeout_ms)};
  });
#else
  (void)store, (void)rank, (void)size, (void)timeout_ms, (void)out;
  return fail(err, SKYRL_C10D_ERR, "the c10d shim was built without NCCL");
#endif
}

int skyrl_pg_allreduce(skyrl_pg* pg, void* tensor, int op, char** err) {
  return guard(err, [&] {
    at::Tensor& t = tensor_ref(tensor);
    bool divide = false;
    c10d::AllreduceOptions opts;
    opts.reduceOp = reduce_op(pg, op, t, &divide);
    std::vector<at::Tensor> ts{t};
    finish(pg, pg->backend->allreduce(ts, opts));
    if (divide) t.div_(pg->size);
  });
}

int skyrl_pg_reduce_scatter(skyrl_pg* pg, void* output, const void* input, int op,
                            char** err) {
  return guard(err, [&] {
    at::Tensor& out = tensor_ref(output);
    at::Tensor in = tensor_copy(input);
    bool divide = false;
    c10d::ReduceScatterOptions opts;
    opts.reduceOp = reduce_op(pg, op, in, &divide);
    // reduce_scatter_tensor: flat input, this rank's chunk lands in out.
    finish(pg, pg->backend->_reduce_scatter_base(out, in, opts));
    if (divide) out.div_(pg->size);
  });
}

int skyrl_pg_allgather(skyrl_pg* pg, void* output, const void* input, char** err) {
  return guard(err, [&] {
    at::Tensor& out = tensor_ref(output);
    at::Tensor in = tensor_copy(input);
    // all_gather_into_tensor: chunk r of the flat output comes from rank r.
    finish(pg, pg->backend->_allgather_base(out, in));
  });
}

int skyrl_pg_broadcast(skyrl_pg* pg, void* tensor, int root, char** err) {
  return guard(err, [&] {
    std::vector<at::Tensor> ts{tensor_ref(tensor)};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    finish(pg, pg->backend->broadcast(ts, opts));
  });
}

int skyrl_pg_barrier(skyrl_pg* pg, char** err) {
  return guard(err, [&] { finish(pg, pg->backend->barrier()); });
}

void skyrl_pg_free(skyrl_pg* pg, int abort) {
  if (pg == nullptr) return;
  try {
    // Gloo: both are no-ops and the destructor joins its threads. NCCL: abort
    // skips waiting on communicators whose peers are gone.
    if (abort != 0) {
      pg->backend->abort();
    } else {
      pg->backend->shutdown();
    }
  } catch (...) {
  }
  try {
    delete pg;
  } catch (...) {
  }
}

}  // extern "C"
