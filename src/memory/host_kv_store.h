// The bytes behind the host KV registry (DESIGN.md §5; issue 6): a pool of
// fixed-size host slabs, one KV block each, in memory separate from any
// device arena. The registry (host_kv_registry.h) decides what is kept; this
// store holds the bytes. A block is written (D2H) together with the XXH3
// hash of its bytes, and read back (H2D) only if the bytes still hash to it:
// a corrupted or stale slab is reported, and the caller recomputes instead
// of restoring wrong KV.
//
// The store copies at memory speed and never waits: emulating a slower link
// (PCIe) is the copy engine's business, in the driver that owns time. Not
// synchronized.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace talaria {

class HostKvStore {
 public:
  using Slot = std::int32_t;

  HostKvStore(std::size_t block_bytes, std::int32_t slabs);

  std::size_t block_bytes() const { return block_bytes_; }
  std::int32_t free_slabs() const { return static_cast<std::int32_t>(free_.size()); }

  // D2H: copies one block in and records its hash. -1 when every slab is taken.
  Slot Put(const void* block);
  // H2D: copies the slab into `block` and checks its bytes against the hash
  // recorded at Put (in one pass: hashing while copying). False when they
  // differ: `block` then holds the bad bytes and must be recomputed, never
  // read as KV.
  bool Get(Slot slot, void* block) const;
  void Free(Slot slot);

  // The slab's bytes, writable: for tests that corrupt a slab.
  std::span<std::byte> Bytes(Slot slot);

 private:
  std::size_t block_bytes_;
  struct Unmap {
    std::size_t bytes;
    void operator()(std::byte* p) const;
  };
  static std::unique_ptr<std::byte[], Unmap> MapSlabs(std::size_t bytes);
  // One mapping, separate from device memory, backed only as slabs are
  // first written (a large configured pool costs what is used).
  std::unique_ptr<std::byte[], Unmap> slabs_;
  std::vector<std::uint64_t> hash_;  // per slab, recorded at Put
  std::vector<bool> used_;
  std::vector<Slot> free_;
};

}  // namespace talaria
