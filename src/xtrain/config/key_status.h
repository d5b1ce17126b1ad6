// "Nothing silently ignored": every key the config reads (every row of docs/config.md) has one
// status. `honoured` names a gtest ("Suite.Name") that fails if the key is dropped; `refused` makes a
// non-default value a load error ("not supported yet: <key>"); `no_effect` says why the key cannot
// matter on this build, and a file that sets it gets one start-up line saying so.
// tests/config/key_status_test.cpp walks the key list and checks each status against its claim.
#pragma once
#include <string>
#include <vector>

#include "xtrain/config/visitors.h"

namespace xtrain::config {

enum class KeyState { honoured, refused, no_effect };

struct KeyStatus {
  const char* key;     // as docs/config.md writes it ("optimizer.params (Lamb).max_coeff")
  KeyState state;
  const char* detail;  // honoured: "Suite.Name"; refused: what to use instead ("" if nothing); no_effect: why
};

// The whole table, in docs/config.md order.
const std::vector<KeyStatus>& key_statuses();

// The status of a key as docs/config.md writes it, or as a file spells it (the parenthesised variant
// of optimizer/scheduler params dropped: "optimizer.params.lr"); nullptr if the key is not listed.
const KeyStatus* find_key_status(const std::string& key);

// "optimizer.params (Lamb).max_coeff" -> "optimizer.params.max_coeff".
std::string file_key(const std::string& doc_key);

const char* state_name(KeyState state);

// The keys of docs/config.md in order, from the same visit that generates it (config.cpp).
std::vector<KeyRow> key_rows();

// The start-up line for a no_effect key the file sets, and the load error for a refused one.
std::string no_effect_line(const KeyStatus& status);
std::string refused_message(const KeyStatus& status);

}  // namespace xtrain::config
