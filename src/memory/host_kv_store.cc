#include "memory/host_kv_store.h"

#include <sys/mman.h>

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>  // XXH3 picks SSE2 / AVX2 / AVX-512 at run time
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#if defined(__x86_64__)
#include <emmintrin.h>  // SSE2: non-temporal stores
#endif

#include "core/error.h"

namespace talaria {
namespace {

std::uint64_t Hash(const void* data, std::size_t n) {
#if defined(__x86_64__)
  return XXH3_64bits_dispatch(data, n);
#else
  return XXH3_64bits(data, n);
#endif
}

// Copies `n` bytes that are in cache to `dst` with non-temporal stores
// where `dst` is 16-byte aligned: the destination lines are written without
// being read first (a plain copy's stores read each line for ownership), and
// do not evict the chunk being hashed. The caller fences once at the end.
void StreamCopy(const std::byte* src, std::byte* dst, std::size_t n) {
#if defined(__x86_64__)
  const std::size_t head = std::min(n, (16 - reinterpret_cast<std::uintptr_t>(dst) % 16) % 16);
  std::memcpy(dst, src, head);
  std::size_t off = head;
  for (; off + 64 <= n; off += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + off));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + off + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + off + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + off + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + off), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + off + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + off + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + off + 48), d);
  }
  std::memcpy(dst + off, src + off, n - off);
#else
  std::memcpy(dst, src, n);
#endif
}

// Hashes `n` bytes at `src` while copying them to `dst`, a cache-sized
// chunk at a time, so the bytes cross the memory bus once: the hash reads
// a chunk in, the copy reads it back from cache and streams it out.
std::uint64_t HashWhileCopying(const std::byte* src, void* dst, std::size_t n) {
  constexpr std::size_t kChunk = 4 * 1024;
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  auto* out = static_cast<std::byte*>(dst);
  for (std::size_t off = 0; off < n; off += kChunk) {
    const std::size_t len = std::min(kChunk, n - off);
#if defined(__x86_64__)
    XXH3_64bits_update_dispatch(&state, src + off, len);
#else
    XXH3_64bits_update(&state, src + off, len);
#endif
    StreamCopy(src + off, out + off, len);
  }
#if defined(__x86_64__)
  _mm_sfence();  // the streamed stores are visible before the block is used
#endif
  return XXH3_64bits_digest(&state);
}

}  // namespace

void HostKvStore::Unmap::operator()(std::byte* p) const { munmap(p, bytes); }

std::unique_ptr<std::byte[], HostKvStore::Unmap> HostKvStore::MapSlabs(std::size_t bytes) {
  TALARIA_CHECK(bytes > 0, "a host KV store needs slabs");
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    throw InputError("host KV store", "cannot map " + std::to_string(bytes) + " bytes of host memory");
  }
  return {static_cast<std::byte*>(p), Unmap{bytes}};
}

HostKvStore::HostKvStore(std::size_t block_bytes, std::int32_t slabs)
    : block_bytes_(block_bytes),
      slabs_(MapSlabs(block_bytes * static_cast<std::size_t>(std::max(slabs, 0)))),
      hash_(static_cast<std::size_t>(slabs), 0),
      used_(static_cast<std::size_t>(slabs), false) {
  TALARIA_CHECK(block_bytes > 0 && slabs > 0, "a host KV store needs slabs");
  for (Slot s = slabs - 1; s >= 0; --s) free_.push_back(s);  // lowest slot first
}

HostKvStore::Slot HostKvStore::Put(const void* block) {
  if (free_.empty()) return -1;
  const Slot s = free_.back();
  free_.pop_back();
  std::byte* dst = slabs_.get() + static_cast<std::size_t>(s) * block_bytes_;
  std::memcpy(dst, block, block_bytes_);
  hash_[static_cast<std::size_t>(s)] = Hash(dst, block_bytes_);
  used_[static_cast<std::size_t>(s)] = true;
  return s;
}

bool HostKvStore::Get(Slot slot, void* block) const {
  TALARIA_CHECK(slot >= 0 && static_cast<std::size_t>(slot) < used_.size() && used_[static_cast<std::size_t>(slot)],
                "reading a host KV slab that holds no block");
  const std::byte* src = slabs_.get() + static_cast<std::size_t>(slot) * block_bytes_;
  return HashWhileCopying(src, block, block_bytes_) == hash_[static_cast<std::size_t>(slot)];
}

void HostKvStore::Free(Slot slot) {
  TALARIA_CHECK(slot >= 0 && static_cast<std::size_t>(slot) < used_.size() && used_[static_cast<std::size_t>(slot)],
                "freeing a host KV slab that holds no block");
  used_[static_cast<std::size_t>(slot)] = false;
  free_.push_back(slot);
}

std::span<std::byte> HostKvStore::Bytes(Slot slot) {
  TALARIA_CHECK(slot >= 0 && static_cast<std::size_t>(slot) < used_.size(), "no such slab");
  return {slabs_.get() + static_cast<std::size_t>(slot) * block_bytes_, block_bytes_};
}

}  // namespace talaria
