// Reading and writing safetensors files (the Hugging Face tensor format: an
// 8-byte little-endian header length, a JSON header naming each tensor's
// dtype, shape and byte range, then the data). Tensors are read into fp32;
// F32, BF16 and F16 are accepted. Every problem (a short file, a header that
// is not JSON, an unknown dtype, a shape that disagrees with its byte range,
// ranges outside the data) is an InputError naming the file and tensor.
#pragma once

#include <string>
#include <string_view>

#include "engine/cpu_model.h"

namespace talaria {

TensorMap LoadSafetensors(const std::string& path);
// The same from a file's bytes; `source` names it in errors.
TensorMap ParseSafetensors(std::string_view bytes, const std::string& source);

// Writes `tensors` as F32 (names sorted, so the file is deterministic).
void SaveSafetensors(const std::string& path, const TensorMap& tensors);

}  // namespace talaria
