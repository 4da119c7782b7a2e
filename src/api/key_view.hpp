// One key as the admin listener shows it (private to api/): its settings
// without the digest, where it comes from, its rate state and its budget
// usage. Used by the runtime key API (admin_keys.cpp) and the console
// (console_state.cpp). Never a secret.
#pragma once

#include <nlohmann/json.hpp>

#include "relay/admission/key_registry.hpp"
#include "relay/pipeline/snapshot.hpp"

namespace relay::api {

nlohmann::json describeKey(const pipeline::Snapshot& snapshot, const admission::Tenant& tenant,
                           const admission::KeyRegistry* registry);

}  // namespace relay::api
