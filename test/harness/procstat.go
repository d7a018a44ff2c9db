package harness

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcStat is what Linux's /proc tells of a process, for load generators that measure the
// project's binaries from outside.
type ProcStat struct {
	// CPUSeconds is the user and system CPU time used so far.
	CPUSeconds float64
	// RSSMiB is the resident memory now; PeakRSSMiB its highest so far.
	RSSMiB, PeakRSSMiB float64
	// Threads is the number of OS threads.
	Threads int
	// WrittenBytes counts the bytes the process passed to write-like system calls, sockets
	// included (/proc/<pid>/io wchar): what a server sent, with its log.
	WrittenBytes int64
}

// ReadProcStat reads pid's figures; a field it cannot read is 0.
func ReadProcStat(pid int) ProcStat {
	var s ProcStat
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// The command's name may hold spaces: the fields follow its closing parenthesis.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
			f := strings.Fields(string(b[i+2:]))
			if len(f) > 12 {
				utime, _ := strconv.ParseFloat(f[11], 64)
				stime, _ := strconv.ParseFloat(f[12], 64)
				s.CPUSeconds = (utime + stime) / 100 // clock ticks of 10 ms
			}
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(l, ":")
			if !ok {
				continue
			}
			n, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64) // a malformed line reads as 0
			switch k {
			case "VmRSS":
				s.RSSMiB = n / 1024
			case "VmHWM":
				s.PeakRSSMiB = n / 1024
			case "Threads":
				s.Threads = int(n)
			}
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "wchar: "); ok {
				s.WrittenBytes, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			}
		}
	}
	return s
}
