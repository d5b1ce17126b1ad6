// Plugins: shared libraries that add models, datasets, optimizers … to xtrain's registries at run
// time (`xtrain train --plugin libmine.so`). A plugin links no xtrain library (CMake:
// xtrain::plugin_api); it is opened with RTLD_NOW | RTLD_GLOBAL and its xtrain symbols resolve from
// the running program, which exports them, so its registrations land in the program's registries.
// Registration: the library's static initialisers, and/or an `extern "C" void xtrain_plugin_init()`
// that load() calls once after opening it (an exception from it reaches the caller as an error).
// Example: examples/plugin/. Reference: dlopen(3); LLVM's -load / -fpass-plugin.
#pragma once
#include <string>
#include <vector>

namespace xtrain::plugin {

// The name of the optional entry function a plugin may define (extern "C", no arguments).
inline constexpr const char* kInitSymbol = "xtrain_plugin_init";

// Opens the library at `path` (a file path: relative to the working directory, never searched in
// LD_LIBRARY_PATH) and runs its registrations. Loading the same file again does nothing. A missing
// file or a dlopen failure is a UsageError naming `what` (e.g. "--plugin"), the path and dlerror().
void load(const std::string& path, const std::string& what = "--plugin");
void load_all(const std::vector<std::string>& paths, const std::string& what = "--plugin");

// The absolute paths of the libraries loaded so far, in load order (tune hands them to its trials).
std::vector<std::string> loaded();

}  // namespace xtrain::plugin
