package harness

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// KillStale kills every process (but this one) whose command line names a path under dir:
// what an earlier run that was killed before its cleanup left running there (etcd,
// kube-apiserver and the project's binaries of `make demo` keep their files in its
// folder). It returns how many it killed.
func KillStale(dir string) int {
	var killed []int
	for _, pid := range processesNaming(dir) {
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
		}
	}
	for _, pid := range killed {
		for i := 0; i < 50 && syscall.Kill(pid, 0) == nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return len(killed)
}

// processesNaming returns every process (but this one) whose command line names a path
// under dir.
func processesNaming(dir string) []int {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	needle := []byte(abs + string(filepath.Separator))
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, needle) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}
