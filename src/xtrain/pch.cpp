// Owner of the shared precompiled header (see pch.h).
