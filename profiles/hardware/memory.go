package hardware

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// MemTotal is the machine's RAM in bytes, 0 where it cannot be read.
func MemTotal() uint64 { return host().Host.MemTotal() }

// MemAvailable is the memory the kernel says a new allocation can take
// without swapping (MemAvailable in /proc/meminfo: free memory and the
// caches it can drop), in bytes; 0 where it cannot be read. A server sizes
// the KV caches of its requests from it once its models are open.
func MemAvailable() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 2 && fs[0] == "MemAvailable:" {
			kib, err := strconv.ParseUint(fs[1], 10, 64)
			if err != nil || kib > 1<<50 {
				return 0
			}
			return kib << 10
		}
	}
	return 0
}
