// One type of an open `{type, params}` section (optimizer, scheduler) as the config reader sees it:
// its name, how its `params` block is read, written and documented, and the checks that run once
// the file is read. The reader asks the section's registry (config/optimizer_types.h,
// config/scheduler_types.h) instead of switching on type strings; the areas that build the objects
// (optim/, sched/) keep their own registries of factories.
#pragma once
#include <any>
#include <functional>
#include <typeinfo>
#include <string>
#include <type_traits>
#include <vector>

#include "xtrain/base/registry.h"
#include "xtrain/config/visitors.h"

namespace xtrain::config {

template <class Options>
struct SectionType {
  using OptionsType = Options;
  std::string name;         // canonical, as written back to the resolved config
  std::string description;  // one line, for docs/config.md
  // docs/config.md's label of its params block, e.g. "params (Adam, AdamW)"; "" when another type
  // documents the same keys.
  std::string params_label;
  std::function<void(JsonReader&, Options&)> read;  // fills the params from the section's "params"
  std::function<void(JsonWriter&, Options&)> write;
  std::function<void(DocWriter&, Options&)> document;
  // After reading: each failing check appends a message naming its key. Optional.
  std::function<void(const Options&, std::vector<std::string>&)> validate;
};

// Points read/write/document at one params struct `P` (with a visit(V&) listing its keys) that
// `get` finds inside the options.
template <class Options, class Get>
void bind_params(SectionType<Options>& t, Get get) {
  t.read = [get](JsonReader& v, Options& o) { get(o).visit(v); };
  t.write = [get](JsonWriter& v, Options& o) { get(o).visit(v); };
  t.document = [get](DocWriter& v, Options& o) { get(o).visit(v); };
}

// A type whose params are the options' member `member` (a built-in type).
template <class Type, class P, class Options>
Type member_section_type(const std::string& name, const std::string& description, const std::string& label,
                         P Options::*member) {
  Type t;
  t.name = name;
  t.description = description;
  t.params_label = label;
  bind_params(t, [member](Options& o) -> P& { return o.*member; });
  return t;
}

// A type whose params struct P (with visit(V&)) lives in the options' `custom` (a std::any): what a
// registered type that is not built in uses.
template <class Type, class P>
Type custom_section_type(const std::string& name, const std::string& description) {
  using Options = typename Type::OptionsType;
  Type t;
  t.name = name;
  t.description = description;
  t.params_label = "params (" + name + ")";
  bind_params(t, [](Options& o) -> P& {
    if (!o.custom.has_value() || o.custom.type() != typeid(P)) o.custom = P{};
    return std::any_cast<P&>(o.custom);
  });
  return t;
}

// The `params` block(s) of a section: the chosen type's when reading or writing; every type's,
// each under its label, when documenting. `prepare(ps)` runs inside each block first (forbidden keys).
template <class V, class Options, class Entry, class Prepare>
void visit_section_params(V& s, Options& o, const std::string& type, Registry<Entry>& types, Prepare prepare) {
  if constexpr (std::is_same_v<V, DocWriter>) {
    for (const auto& name : types.names()) {
      const Entry& t = types.find(name, "");
      if (t.params_label.empty() || !t.document) continue;
      s.nested(t.params_label.c_str(), [&](DocWriter& ps) {
        prepare(ps);
        t.document(ps, o);
      });
    }
  } else {
    const Entry* t = types.lookup(type);
    if (t == nullptr) return;  // "" (no scheduler) or a type the reader already reported
    s.nested("params", [&](V& ps) {
      prepare(ps);
      if constexpr (std::is_same_v<V, JsonReader>) {
        if (t->read) t->read(ps, o);
      } else {
        if (t->write) t->write(ps, o);
      }
    });
  }
}

}  // namespace xtrain::config
