#include "ember/tensor/dtype.h"

namespace ember {

size_t element_size(DType t) {
  switch (t) {
    case kBool:
    case kUInt8:
    case kInt8:
      return 1;
    case kFloat16:
    case kBFloat16:
      return 2;
    case kInt32:
    case kFloat32:
      return 4;
    case kInt64:
    case kFloat64:
      return 8;
  }
  EMBER_ASSERT(false, "bad dtype");
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case kBool:
      return "bool";
    case kUInt8:
      return "uint8";
    case kInt8:
      return "int8";
    case kInt32:
      return "int32";
    case kInt64:
      return "int64";
    case kFloat16:
      return "float16";
    case kBFloat16:
      return "bfloat16";
    case kFloat32:
      return "float32";
    case kFloat64:
      return "float64";
  }
  return "?";
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == kBool) return b;
  if (b == kBool) return a;
  const bool fa = is_floating(a), fb = is_floating(b);
  if (fa != fb) return fa ? a : b;  // a float beats any integer
  if (fa) {
    // The two 16-bit formats hold different ranges; only float32 holds both.
    if ((a == kFloat16 && b == kBFloat16) || (a == kBFloat16 && b == kFloat16)) return kFloat32;
    return a > b ? a : b;  // Float16/BFloat16 < Float32 < Float64 in the enum
  }
  // Both integers: uint8 mixes with a signed type by widening until both fit.
  if (a == kUInt8 || b == kUInt8) {
    const DType other = a == kUInt8 ? b : a;
    return other == kInt8 ? kInt32 : other;
  }
  return a > b ? a : b;
}

}  // namespace ember
