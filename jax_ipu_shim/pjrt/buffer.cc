// PJRT_Buffer: an array on an emulated IPU, defined by queued work. Transfers (host link, IPU-Links) are counted
// on the devices.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <system_error>

#include "ipu/dtype.h"
#include "plugin.h"

namespace jax_ipu {

namespace {

struct TypeInfo {
  PJRT_Buffer_Type type;
  const char* name;
  size_t size;
  int xla_primitive_type;  // xla::PrimitiveType
};

// Every element type PJRT can name. Buffers hold any of them; programs accept only what the emulator computes on.
constexpr TypeInfo kTypes[] = {
    {PJRT_Buffer_Type_PRED, "bool", 1, 1},
    {PJRT_Buffer_Type_S8, "int8", 1, 2},
    {PJRT_Buffer_Type_S16, "int16", 2, 3},
    {PJRT_Buffer_Type_S32, "int32", 4, 4},
    {PJRT_Buffer_Type_S64, "int64", 8, 5},
    {PJRT_Buffer_Type_U8, "uint8", 1, 6},
    {PJRT_Buffer_Type_U16, "uint16", 2, 7},
    {PJRT_Buffer_Type_U32, "uint32", 4, 8},
    {PJRT_Buffer_Type_U64, "uint64", 8, 9},
    {PJRT_Buffer_Type_F16, "float16", 2, 10},
    {PJRT_Buffer_Type_F32, "float32", 4, 11},
    {PJRT_Buffer_Type_F64, "float64", 8, 12},
    {PJRT_Buffer_Type_BF16, "bfloat16", 2, 16},
    {PJRT_Buffer_Type_C64, "complex64", 8, 15},
    {PJRT_Buffer_Type_C128, "complex128", 16, 18},
    {PJRT_Buffer_Type_F8E5M2, "float8_e5m2", 1, 19},
    {PJRT_Buffer_Type_F8E4M3FN, "float8_e4m3fn", 1, 20},
#if JAX_IPU_PJRT_MINOR >= 90
    // Held as jax hands them over, one element per byte (the sub-byte integers unpacked, their bits in the low bits:
    // the emulator's own form of them, ipu/dtype.h); a program that computes on a type the emulator lacks is refused
    // by name.
    {PJRT_Buffer_Type_S4, "int4", 1, 21},
    {PJRT_Buffer_Type_U4, "uint4", 1, 22},
    {PJRT_Buffer_Type_F8E4M3B11FNUZ, "float8_e4m3b11fnuz", 1, 23},
    {PJRT_Buffer_Type_F8E5M2FNUZ, "float8_e5m2fnuz", 1, 24},
    {PJRT_Buffer_Type_F8E4M3FNUZ, "float8_e4m3fnuz", 1, 25},
    {PJRT_Buffer_Type_S2, "int2", 1, 26},
    {PJRT_Buffer_Type_U2, "uint2", 1, 27},
    {PJRT_Buffer_Type_F8E4M3, "float8_e4m3", 1, 28},
    {PJRT_Buffer_Type_F8E3M4, "float8_e3m4", 1, 29},
    {PJRT_Buffer_Type_F4E2M1FN, "float4_e2m1fn", 1, 32},
    {PJRT_Buffer_Type_F8E8M0FNU, "float8_e8m0fnu", 1, 33},
#endif
};

const TypeInfo* Find(PJRT_Buffer_Type type) {
  for (const TypeInfo& info : kTypes) {
    if (info.type == type) return &info;
  }
  return nullptr;
}

size_t ByteSize(const PJRT_Buffer* buffer) { return NumElements(buffer->dims) * ElementSize(buffer->type); }

// Copies a strided host array into dense row-major bytes.
void GatherStrided(const uint8_t* src, const std::vector<int64_t>& dims, const int64_t* byte_strides,
                   size_t element_size, uint8_t* dst) {
  const size_t rank = dims.size();
  std::vector<int64_t> index(rank, 0);
  const int64_t count = NumElements(dims);
  for (int64_t n = 0; n < count; ++n) {
    int64_t offset = 0;
    for (size_t d = 0; d < rank; ++d) offset += index[d] * byte_strides[d];
    std::memcpy(dst + n * element_size, src + offset, element_size);
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < dims[d]) break;
      index[d] = 0;
    }
  }
}

Bytes LiveData(PJRT_Buffer* buffer, const char* what) {
  std::lock_guard<std::mutex> lock(buffer->mutex);
  if (!buffer->data) {
    throw ipu::Error(ipu::ErrorCode::InvalidArgument,
                     std::string(what) + ": the ipu buffer has been deleted or donated");
  }
  return buffer->data;
}

// Below this a copy is not worth starting threads for (a thread start costs about as much as copying 100 KB).
constexpr size_t kParallelCopyBytes = size_t{4} << 20;

}  // namespace

void ParallelCopy(void* dst, const void* src, size_t bytes, int threads) {
  const int parts = static_cast<int>(std::min<size_t>(std::max(1, threads), bytes / (kParallelCopyBytes / 2)));
  if (parts <= 1) {
    if (bytes) std::memcpy(dst, src, bytes);
    return;
  }
  const size_t chunk = (bytes / parts + 63) & ~size_t{63};
  auto part = [&](int i) {
    const size_t b = std::min(bytes, chunk * i), e = std::min(bytes, chunk * (i + 1));
    if (b < e) std::memcpy(static_cast<uint8_t*>(dst) + b, static_cast<const uint8_t*>(src) + b, e - b);
  };
  std::vector<std::thread> helpers;
  try {
    for (int i = 1; i < parts; ++i) helpers.emplace_back(part, i);
  } catch (const std::system_error&) {
    // No thread to spare: the calling thread copies what no helper took.
    for (int i = static_cast<int>(helpers.size()) + 1; i < parts; ++i) part(i);
  }
  part(0);
  for (std::thread& t : helpers) t.join();
}

size_t ElementSize(PJRT_Buffer_Type type) {
  const TypeInfo* info = Find(type);
  return info ? info->size : 0;
}

const char* TypeName(PJRT_Buffer_Type type) {
  const TypeInfo* info = Find(type);
  return info ? info->name : "invalid";
}

int XlaPrimitiveType(PJRT_Buffer_Type type) {
  const TypeInfo* info = Find(type);
  return info ? info->xla_primitive_type : 0;
}

namespace {

// PJRT's enumerator for a row of the emulator's dtype table, derived from its traits (kind, width, signedness).
PJRT_Buffer_Type PjrtTypeOf(const ipu::DTypeInfo& t) {
  switch (t.storage) {
    case ipu::StorageKind::Bool: return PJRT_Buffer_Type_PRED;
    case ipu::StorageKind::Half: return PJRT_Buffer_Type_F16;
    case ipu::StorageKind::BFloat16: return PJRT_Buffer_Type_BF16;
    case ipu::StorageKind::Float32: return PJRT_Buffer_Type_F32;
    case ipu::StorageKind::Complex64: return PJRT_Buffer_Type_C64;
    case ipu::StorageKind::Complex128: return PJRT_Buffer_Type_C128;
    case ipu::StorageKind::Float64: return PJRT_Buffer_Type_F64;
    case ipu::StorageKind::Int:
      switch (t.size) {
        case 1: return t.is_signed ? PJRT_Buffer_Type_S8 : PJRT_Buffer_Type_U8;
        case 2: return t.is_signed ? PJRT_Buffer_Type_S16 : PJRT_Buffer_Type_U16;
        case 4: return t.is_signed ? PJRT_Buffer_Type_S32 : PJRT_Buffer_Type_U32;
        case 8: return t.is_signed ? PJRT_Buffer_Type_S64 : PJRT_Buffer_Type_U64;
      }
      break;
    case ipu::StorageKind::Float8:
      switch (t.dtype) {
        case ipu::DType::F8E4M3FN: return PJRT_Buffer_Type_F8E4M3FN;
        case ipu::DType::F8E5M2: return PJRT_Buffer_Type_F8E5M2;
#if JAX_IPU_PJRT_MINOR >= 90
        case ipu::DType::F8E4M3FNUZ: return PJRT_Buffer_Type_F8E4M3FNUZ;
        case ipu::DType::F8E5M2FNUZ: return PJRT_Buffer_Type_F8E5M2FNUZ;
        case ipu::DType::F8E4M3B11FNUZ: return PJRT_Buffer_Type_F8E4M3B11FNUZ;
#endif
        default: break;  // not in this API version's enumeration
      }
      break;
    case ipu::StorageKind::SubByte:
      switch (t.dtype) {
#if JAX_IPU_PJRT_MINOR >= 90
        case ipu::DType::I4: return PJRT_Buffer_Type_S4;
        case ipu::DType::U4: return PJRT_Buffer_Type_U4;
        case ipu::DType::I2: return PJRT_Buffer_Type_S2;
        case ipu::DType::U2: return PJRT_Buffer_Type_U2;
#endif
        default: break;  // not in this API version's enumeration
      }
      break;
    case ipu::StorageKind::Token: break;  // tokens never leave a program: jax passes bool[0] dummies instead
  }
  return PJRT_Buffer_Type_INVALID;
}

// Both directions as arrays, built once: every Execute converts each argument's and result's type, and a search
// of the dtype table per conversion was a visible part of a tiny call's cost.
constexpr size_t kNumDTypes = sizeof(ipu::kDTypeTable) / sizeof(ipu::kDTypeTable[0]);
constexpr int kMaxPjrtType = 64;  // PJRT_Buffer_Type values are small
struct DTypeMaps {
  PJRT_Buffer_Type to_pjrt[kNumDTypes + 1];    // indexed by DType
  int to_ipu[kMaxPjrtType];                    // DType + 1, or 0: no emulator dtype
  DTypeMaps() : to_pjrt(), to_ipu() {
    for (size_t i = 0; i <= kNumDTypes; ++i) to_pjrt[i] = PJRT_Buffer_Type_INVALID;
    for (const ipu::DTypeInfo& t : ipu::kDTypeTable) {
      const size_t d = static_cast<size_t>(t.dtype);
      if (d <= kNumDTypes) to_pjrt[d] = PjrtTypeOf(t);
      const int p = static_cast<int>(PjrtTypeOf(t));
      // The first row wins, as the search did (tokens excluded).
      if (t.dtype != ipu::DType::Token && p > 0 && p < kMaxPjrtType && to_ipu[p] == 0)
        to_ipu[p] = static_cast<int>(d) + 1;
    }
  }
};
const DTypeMaps& Maps() {
  static const DTypeMaps maps;
  return maps;
}

}  // namespace

PJRT_Buffer_Type FromIpuDType(ipu::DType dtype) {
  const size_t d = static_cast<size_t>(dtype);
  return d <= kNumDTypes ? Maps().to_pjrt[d] : PjrtTypeOf(ipu::dtypeInfo(dtype));
}

void RequireBufferTypes(const ipu::Executable& program) {
  for (const auto* list : {&program.inputTypes(), &program.outputTypes()})
    for (const ipu::TensorType& t : *list)
      if (FromIpuDType(t.dtype) == PJRT_Buffer_Type_INVALID)
        throw ipu::Error(ipu::ErrorCode::Unimplemented,
                         std::string("a program whose ") + (list == &program.inputTypes() ? "parameters" : "results") +
                             " hold " + t.str() + " cannot run here: this jaxlib's PJRT C API has no buffer type for " +
                             ipu::dtypeName(t.dtype) +
                             "; compute it inside the program and pass another type in and out");
}

bool ToIpuDType(PJRT_Buffer_Type type, ipu::DType* out) {
  const int p = static_cast<int>(type);
  if (p <= 0 || p >= kMaxPjrtType || Maps().to_ipu[p] == 0) return false;
  *out = static_cast<ipu::DType>(Maps().to_ipu[p] - 1);
  return true;
}

int64_t NumElements(const std::vector<int64_t>& dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<int64_t>());
}

PJRT_Buffer* NewBuffer(PJRT_Device* device, PJRT_Buffer_Type type, std::vector<int64_t> dims, Bytes data,
                       std::shared_ptr<Completion> defined) {
  auto* buffer = new PJRT_Buffer();
  buffer->device = device;
  buffer->type = type;
  buffer->dims = std::move(dims);
  buffer->data = std::move(data);
  buffer->defined = std::move(defined);
  CountArray(buffer);
  return buffer;
}

}  // namespace jax_ipu

using namespace jax_ipu;

PJRT_Error* PJRT_Client_BufferFromHostBuffer_Impl(PJRT_Client_BufferFromHostBuffer_Args* args) {
  return Guard("PJRT_Client_BufferFromHostBuffer", [&]() -> PJRT_Error* {
    const size_t element_size = ElementSize(args->type);
    if (element_size == 0) {
      return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                       "element type " + std::to_string(args->type) +
                           " cannot be stored on the ipu backend: it is not one of the buffer types of this jaxlib's "
                           "PJRT C API (jaxlib 0.4.13's has no fp8 type but float8_e5m2 and float8_e4m3fn)");
    }
    std::vector<int64_t> dims(args->dims, args->dims + args->num_dims);
    for (int64_t d : dims) {
      if (d < 0) return MakeError(PJRT_Error_Code_INVALID_ARGUMENT, "negative dimension in host buffer");
    }
    const size_t bytes = NumElements(dims) * element_size;
    auto data = std::make_shared<ByteVector>(bytes);  // not zero-filled: the copy below writes every byte
    const auto* src = static_cast<const uint8_t*>(args->data);
    const int64_t started = SpanStartNs();  // PVTI_OPTIONS, jax.profiler
    bool dense = args->num_byte_strides == 0;
    if (!dense) {
      if (args->num_byte_strides != dims.size()) {
        return MakeError(PJRT_Error_Code_INVALID_ARGUMENT, "byte_strides and dims differ in length");
      }
      int64_t expected = static_cast<int64_t>(element_size);
      dense = true;
      for (size_t d = dims.size(); d-- > 0;) {
        if (dims[d] > 1 && args->byte_strides[d] != expected) dense = false;
        expected *= dims[d];
      }
    }
    if (bytes > 0) {
      if (dense) {
        ParallelCopy(data->data(), src, bytes, args->client->pool->threads());
      } else {
        GatherStrided(src, dims, args->byte_strides, element_size, data->data());
      }
    }
    PJRT_Device* device = args->device ? args->device : args->client->addressable_pointers.front();
#if JAX_IPU_PJRT_MINOR >= 90
    // The newer tables may name the destination by its memory space instead (each IPU's one memory).
    if (!args->device && args->memory) device = args->memory->device;
#endif
    if (!device->addressable) {
      throw ipu::Error(ipu::ErrorCode::InvalidArgument,
                       "ipu device " + std::to_string(device->description.id) + " belongs to process " +
                           std::to_string(device->process_index) + ": this process (" +
                           std::to_string(args->client->process_index) + ") can only put arrays on its own IPUs");
    }
    CountHostTransfer(device, bytes, /*to_device=*/true, started);
    // The host data is copied before returning (jax may free it at once), so the buffer is born defined.
    args->buffer = NewBuffer(device, args->type, std::move(dims), std::move(data), Completion::Ready());
    args->done_with_host_buffer = ReadyEvent();
    return nullptr;
  });
}

PJRT_Error* PJRT_Buffer_Destroy_Impl(PJRT_Buffer_Destroy_Args* args) {
  UncountArray(args->buffer);
  delete args->buffer;
  return nullptr;
}

#if JAX_IPU_PJRT_MINOR == 0
PJRT_Error* PJRT_Buffer_OnDeviceTrimmedShape_Impl(PJRT_Buffer_OnDeviceTrimmedShape_Args* args) {
  return Guard("PJRT_Buffer_OnDeviceTrimmedShape", [&]() -> PJRT_Error* {
    const size_t layout_offset = offsetof(PJRT_Buffer_OnDeviceTrimmedShape_Args, layout);
    if (PJRT_Error* e =
            CheckStructSize("PJRT_Buffer_OnDeviceTrimmedShape", args->struct_size, layout_offset + sizeof(Int64List))) {
      return e;
    }
    PJRT_Buffer* buffer = args->buffer;
    const int64_t rank = static_cast<int64_t>(buffer->dims.size());
    args->element_type = XlaPrimitiveType(buffer->type);
    // jaxlib 0.4.13's layout struct is larger than TF 2.13's: zero all of it, up to the caller's size.
    std::memset(reinterpret_cast<char*>(args) + layout_offset, 0, args->struct_size - layout_offset);
    // Lists longer than the inline capacity live on the heap; jaxlib delete[]s them.
    int64_t* dims = rank > TPU_C_API_MAX_INLINED ? new int64_t[rank] : args->dimensions.inlined;
    bool* dynamic = rank > TPU_C_API_MAX_INLINED ? new bool[rank] : args->dynamic_dimensions.inlined;
    int64_t* minor_to_major = rank > TPU_C_API_MAX_INLINED ? new int64_t[rank] : args->layout.minor_to_major.inlined;
    for (int64_t i = 0; i < rank; ++i) {
      dims[i] = buffer->dims[i];
      dynamic[i] = false;
      minor_to_major[i] = rank - 1 - i;
    }
    if (rank > TPU_C_API_MAX_INLINED) {
      args->dimensions.heap = dims;
      args->dynamic_dimensions.heap = dynamic;
      args->layout.minor_to_major.heap = minor_to_major;
    }
    args->dimensions.size = rank;
    args->dynamic_dimensions.size = rank;
    args->layout.minor_to_major.size = rank;
    args->has_layout = true;
    return nullptr;
  });
}
#endif

PJRT_Error* PJRT_Buffer_OnDeviceSizeInBytes_Impl(PJRT_Buffer_OnDeviceSizeInBytes_Args* args) {
  args->on_device_size_in_bytes = ByteSize(args->buffer);
  return nullptr;
}

PJRT_Error* PJRT_Buffer_Device_Impl(PJRT_Buffer_Device_Args* args) {
  args->device = args->buffer->device;
  return nullptr;
}

PJRT_Error* PJRT_Buffer_Delete_Impl(PJRT_Buffer_Delete_Args* args) {
  std::lock_guard<std::mutex> lock(args->buffer->mutex);
  DropBytes(args->buffer);
  return nullptr;
}

PJRT_Error* PJRT_Buffer_IsDeleted_Impl(PJRT_Buffer_IsDeleted_Args* args) {
  std::lock_guard<std::mutex> lock(args->buffer->mutex);
  args->is_deleted = !args->buffer->data;
  return nullptr;
}

PJRT_Error* PJRT_Buffer_CopyToDevice_Impl(PJRT_Buffer_CopyToDevice_Args* args) {
  return Guard("PJRT_Buffer_CopyToDevice", [&]() -> PJRT_Error* {
    PJRT_Buffer* src = args->buffer;
    Bytes data = LiveData(src, "copy to device");
    PJRT_Device* from = src->device;
    PJRT_Device* to = args->dst_device;
    auto copy = std::make_shared<ByteVector>();
    auto done = std::make_shared<Completion>();
    // On the source IPU's queue, after the work that defines the source: IPU to IPU over the IPU-Links, never
    // through the host. Both ends count the bytes and the link's cycles.
    Enqueue(from, [data, copy, done, defined = src->defined, from, to]() mutable {
      defined->Wait();
      if (defined->code() != 0) return done->SetFrom(*defined);
      try {
        *copy = *data;
      } catch (const std::bad_alloc&) {
        return done->Set(PJRT_Error_Code_RESOURCE_EXHAUSTED,
                         "copy to ipu device " + std::to_string(to->local_hardware_id) + ": out of host memory");
      }
      data.reset();
      if (from != to) {
        for (PJRT_Device* end : {from, to}) CountLinkTransfer(end, copy->size());
      }
      done->Set(static_cast<PJRT_Error_Code>(0), "");
    });
    args->dst_buffer = NewBuffer(to, src->type, src->dims, std::move(copy), std::move(done));
    return nullptr;
  });
}

PJRT_Error* PJRT_Buffer_ToHostBuffer_Impl(PJRT_Buffer_ToHostBuffer_Args* args) {
  return Guard("PJRT_Buffer_ToHostBuffer", [&]() -> PJRT_Error* {
    PJRT_Buffer* src = args->src;
    const size_t bytes = ByteSize(src);
    Bytes data = LiveData(src, "transfer to host");
    if (args->dst == nullptr) {
      args->dst_size = bytes;
      return nullptr;
    }
    if (args->dst_size < bytes) {
      return MakeError(PJRT_Error_Code_INVALID_ARGUMENT, "host buffer of " + std::to_string(args->dst_size) +
                                                             " bytes is too small for " + std::to_string(bytes));
    }
    // Copied once the buffer is defined: at once if it is, else on the thread that defines it. jaxlib keeps
    // `dst` alive until the event completes. A failed definition fails the transfer with its error.
    auto done = std::make_shared<Completion>();
    void* dst = args->dst;
    PJRT_Device* device = src->device;
    src->defined->OnReady([data, dst, bytes, device, done](PJRT_Error_Code code, const std::string& message) {
      if (code != 0) return done->Set(code, message);
      if (data->size() != bytes) {
        return done->Set(PJRT_Error_Code_INTERNAL, "transfer to host: the ipu buffer holds " +
                                                       std::to_string(data->size()) + " bytes, not " +
                                                       std::to_string(bytes));
      }
      const int64_t started = SpanStartNs();  // PVTI_OPTIONS, jax.profiler
      ParallelCopy(dst, data->data(), bytes, device->client->pool->threads());
      CountHostTransfer(device, bytes, /*to_device=*/false, started);
      done->Set(static_cast<PJRT_Error_Code>(0), "");
    });
    args->event = NewEvent(std::move(done));
    return nullptr;
  });
}

PJRT_Error* PJRT_Buffer_IsOnCpu_Impl(PJRT_Buffer_IsOnCpu_Args* args) {
  args->is_on_cpu = false;
  return nullptr;
}

PJRT_Error* PJRT_Buffer_ReadyEvent_Impl(PJRT_Buffer_ReadyEvent_Args* args) {
  args->event = NewEvent(args->buffer->defined);
  return nullptr;
}

// The emulated IPU's buffers live in host memory, so the "device" address is the host address of the bytes. It is
// only meaningful once the work that defines the buffer has finished: wait for it (and fail with its error).
PJRT_Error* PJRT_Buffer_UnsafePointer_Impl(PJRT_Buffer_UnsafePointer_Args* args) {
  return Guard("PJRT_Buffer_UnsafePointer", [&]() -> PJRT_Error* {
    Bytes data = LiveData(args->buffer, "unsafe_buffer_pointer()");
    if (PJRT_Error* error = args->buffer->defined->ToError()) return error;
    args->buffer_pointer = reinterpret_cast<uintptr_t>(data->data());
    return nullptr;
  });
}

// ---- what PJRT C API 0.90 (jaxlib 0.12) added: typed queries, memory spaces
#if JAX_IPU_PJRT_MINOR >= 90

PJRT_Error* PJRT_Buffer_ElementType_Impl(PJRT_Buffer_ElementType_Args* args) {
  args->type = args->buffer->type;
  return nullptr;
}

PJRT_Error* PJRT_Buffer_Dimensions_Impl(PJRT_Buffer_Dimensions_Args* args) {
  args->dims = args->buffer->dims.data();
  args->num_dims = args->buffer->dims.size();
  return nullptr;
}

PJRT_Error* PJRT_Buffer_UnpaddedDimensions_Impl(PJRT_Buffer_UnpaddedDimensions_Args* args) {
  args->unpadded_dims = args->buffer->dims.data();  // IPU arrays are never padded
  args->num_dims = args->buffer->dims.size();
  return nullptr;
}

PJRT_Error* PJRT_Buffer_DynamicDimensionIndices_Impl(PJRT_Buffer_DynamicDimensionIndices_Args* args) {
  args->dynamic_dim_indices = nullptr;  // static shapes only
  args->num_dynamic_dims = 0;
  return nullptr;
}

PJRT_Error* PJRT_Buffer_GetMemoryLayout_Impl(PJRT_Buffer_GetMemoryLayout_Args* args) {
  return Guard("PJRT_Buffer_GetMemoryLayout", [&]() -> PJRT_Error* {
    PJRT_Buffer* buffer = args->buffer;
    {
      std::lock_guard<std::mutex> lock(buffer->mutex);
      if (buffer->minor_to_major.size() != buffer->dims.size()) {
        const int64_t rank = static_cast<int64_t>(buffer->dims.size());
        buffer->minor_to_major.clear();
        for (int64_t i = rank - 1; i >= 0; --i) buffer->minor_to_major.push_back(i);  // row-major, untiled
      }
    }
    std::memset(&args->layout, 0, sizeof(args->layout));
    args->layout.struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE;
    args->layout.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
    args->layout.tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
    args->layout.tiled.minor_to_major = buffer->minor_to_major.data();
    args->layout.tiled.minor_to_major_size = buffer->minor_to_major.size();
    args->layout.tiled.num_tiles = 0;
    return nullptr;
  });
}

PJRT_Error* PJRT_Buffer_Memory_Impl(PJRT_Buffer_Memory_Args* args) {
  args->memory = args->buffer->device->memory;
  return nullptr;
}

PJRT_Error* PJRT_Buffer_CopyToMemory_Impl(PJRT_Buffer_CopyToMemory_Args* args) {
  // Every memory is its device's only one: a copy to a memory is a copy to that memory's device.
  PJRT_Buffer_CopyToDevice_Args copy{};
  copy.struct_size = PJRT_Buffer_CopyToDevice_Args_STRUCT_SIZE;
  copy.buffer = args->buffer;
  copy.dst_device = args->dst_memory->device;
  PJRT_Error* error = PJRT_Buffer_CopyToDevice_Impl(&copy);
  args->dst_buffer = copy.dst_buffer;
  return error;
}

#endif  // JAX_IPU_PJRT_MINOR >= 90
