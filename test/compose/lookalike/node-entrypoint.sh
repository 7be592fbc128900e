#!/bin/sh
# The official node image's docker-entrypoint.sh: run the command with node when the first argument is
# a flag or not a command.
set -e
if [ "${1#-}" != "${1}" ] || [ -z "$(command -v "${1}")" ] || { [ -f "${1}" ] && ! [ -x "${1}" ]; }; then
  set -- node "$@"
fi
exec "$@"
