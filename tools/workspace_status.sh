#!/bin/sh
# Bazel's --workspace_status_command for `--config=stamp` (.bazelrc): the commit the
# binaries are built from (short hash), "+dirty" when tracked files differ from it
# (untracked files are not looked at), as tools/results_lib/paths.py's git_commit writes
# it. Read by //p3/base:build_commit.
commit=$(git rev-parse --short HEAD 2>/dev/null) || exit 0
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  commit="$commit+dirty"
fi
echo "STABLE_P3_COMMIT $commit"
