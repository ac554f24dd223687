#include "engine/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace talaria {
namespace {

using nlohmann::json;

float HalfToFloat(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace

TensorMap LoadSafetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "cannot open");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return ParseSafetensors(bytes, path);
}

TensorMap ParseSafetensors(std::string_view bytes, const std::string& path) {
  if (bytes.size() < 8) throw InputError(path, "too short for a safetensors header");
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  if (header_len > bytes.size() - 8) {
    throw InputError(path, "header length " + std::to_string(header_len) + " runs past the end of the file");
  }
  const json header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header_len),
                                  nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) throw InputError(path, "the header is not a JSON object");
  const std::size_t data_begin = 8 + header_len;
  const std::size_t data_size = bytes.size() - data_begin;
  TensorMap out;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string where = path + ": tensor '" + name + "'";
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") || !info.contains("data_offsets")) {
      throw InputError(where, "needs dtype, shape and data_offsets");
    }
    const auto& dtype_j = info["dtype"];
    const auto& shape_j = info["shape"];
    const auto& offsets_j = info["data_offsets"];
    if (!dtype_j.is_string()) throw InputError(where, "dtype must be a string");
    const std::string dtype = dtype_j.get<std::string>();
    std::size_t width = 0;
    if (dtype == "F32") width = 4;
    else if (dtype == "BF16" || dtype == "F16") width = 2;
    else throw InputError(where, "dtype " + dtype + " is not supported (F32, BF16, F16)");
    if (!shape_j.is_array()) throw InputError(where, "shape must be an array");
    Tensor t;
    // No shape may overflow its byte count (a wrapped count could match a
    // small byte range and then size the tensor without bound).
    std::uint64_t count = 1;
    for (const auto& dim : shape_j) {
      if (!dim.is_number_unsigned()) throw InputError(where, "shape entries must be non-negative integers");
      const auto d = dim.get<std::uint64_t>();
      if (d > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
          (d != 0 && count > std::numeric_limits<std::uint64_t>::max() / width / d)) {
        throw InputError(where, "its shape's element count overflows");
      }
      t.shape.push_back(static_cast<std::int64_t>(d));
      count *= d;
    }
    if (!offsets_j.is_array() || offsets_j.size() != 2 || !offsets_j[0].is_number_unsigned() ||
        !offsets_j[1].is_number_unsigned()) {
      throw InputError(where, "data_offsets must be [begin, end]");
    }
    const auto begin = offsets_j[0].get<std::uint64_t>(), end = offsets_j[1].get<std::uint64_t>();
    if (begin > end || end > data_size) {
      throw InputError(where, "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                                  "] fall outside the " + std::to_string(data_size) + " data bytes");
    }
    if (end - begin != count * width) {
      throw InputError(where, "holds " + std::to_string(end - begin) + " bytes; its shape and dtype need " +
                                  std::to_string(count * width));
    }
    t.data.resize(count);
    const char* src = bytes.data() + data_begin + begin;
    for (std::uint64_t i = 0; i < count; ++i) {
      if (width == 4) {
        std::memcpy(&t.data[i], src + 4 * i, 4);
      } else {
        std::uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        if (dtype == "BF16") {
          const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
          std::memcpy(&t.data[i], &bits, 4);
        } else {
          t.data[i] = HalfToFloat(h);
        }
      }
    }
    out.emplace(name, std::move(t));
  }
  return out;
}

void SaveSafetensors(const std::string& path, const TensorMap& tensors) {
  std::map<std::string, const Tensor*> sorted;
  for (const auto& [name, t] : tensors) sorted.emplace(name, &t);
  json header = json::object();
  std::uint64_t offset = 0;
  for (const auto& [name, t] : sorted) {
    const std::uint64_t size = t->data.size() * sizeof(float);
    header[name] = {{"dtype", "F32"}, {"shape", t->shape}, {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text += ' ';  // align the data to 8 bytes
  std::ofstream out(path, std::ios::binary);
  if (!out) throw InputError(path, "cannot write");
  const std::uint64_t len = text.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((len >> (8 * i)) & 0xff));
  out << text;
  for (const auto& [name, t] : sorted) {
    out.write(reinterpret_cast<const char*>(t->data.data()), static_cast<std::streamsize>(t->data.size() * sizeof(float)));
  }
  if (!out) throw InputError(path, "write failed");
}

}  // namespace talaria
