# Sourced by test-container.sh and ../deploy/test-seccomp.sh: podman on a
# storage of the test's own.
#
# podman_setup DIR RUNC: writes DIR/storage.conf and sets the array podman to
# the podman command line on it: vfs (no overlay mounts to undo), cgroupfs
# (no systemd needed), events to a file, the runtime RUNC (crun refuses a
# hybrid cgroup layout).  CONTAINERS_STORAGE_CONF keeps the machine's
# storage.conf out.
podman_setup() {
	local dir=$1 runc=$2
	cat >"$dir/storage.conf" <<EOF
[storage]
driver = "vfs"
graphroot = "$dir/storage"
runroot = "$dir/runroot"
EOF
	podman=(env CONTAINERS_STORAGE_CONF="$dir/storage.conf" TMPDIR="$dir/tmp"
		podman --root "$dir/storage" --runroot "$dir/runroot" --tmpdir "$dir/libpod"
		--storage-driver vfs --cgroup-manager cgroupfs --events-backend file --runtime "$runc")
}
