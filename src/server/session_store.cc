#include "server/session_store.h"

#include <xxhash.h>

namespace talaria {

std::uint64_t ContextFingerprint(std::span<const std::int32_t> tokens) {
  return XXH3_64bits(tokens.data(), tokens.size_bytes());
}

SessionStore::Status SessionStore::Take(std::string_view session, std::optional<SessionRecord>& out) {
  StoreOp op;
  op.kind = StoreOp::Kind::kTake;
  op.session = session;
  out.reset();
  const Status s = Run(std::span(&op, 1));
  if (s == Status::kOk && op.found) out = std::move(op.record);
  return s;
}

SessionStore::Status SessionStore::Complete(std::string_view session, const SessionRecord& record, double lease_s,
                                            double keep_s) {
  StoreOp op;
  op.kind = StoreOp::Kind::kComplete;
  op.session = session;
  op.record = record;
  op.lease_s = lease_s;
  op.keep_s = keep_s;
  return Run(std::span(&op, 1));
}

SessionStore::Status SessionStore::End(std::string_view session, const SessionRecord& last) {
  StoreOp op;
  op.kind = StoreOp::Kind::kEnd;
  op.session = session;
  op.record = last;
  return Run(std::span(&op, 1));
}

}  // namespace talaria
