package clickhousetest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// listensOn reports whether a process of process group pgid listens on
// the IPv4 TCP port. A connection accepted on a server's port proves only
// that something listens there: another test's process may have bound the
// port after it was found free, and then the server exits with "Address
// already in use" while its tests would talk to a stranger.
func listensOn(pgid, port int) (bool, error) {
	inodes, err := listeningInodes(port)
	if err != nil || len(inodes) == 0 {
		return false, err
	}
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return false, err
	}
	for _, proc := range procs {
		if group, ok := processGroup(proc); !ok || group != pgid {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join(proc, "fd")) // gone or not ours to read: not the server
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(proc, "fd", fd.Name()))
			if err == nil && inodes[link] {
				return true, nil
			}
		}
	}
	return false, nil
}

// listeningInodes returns the sockets listening on port, as the links of
// their file descriptors ("socket:[inode]"), from /proc/net/tcp.
func listeningInodes(port int) (map[string]bool, error) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	const listen = "0A"
	want := fmt.Sprintf(":%04X", port)
	inodes := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) >= 10 && strings.HasSuffix(fields[1], want) && fields[3] == listen {
			inodes["socket:["+fields[9]+"]"] = true
		}
	}
	return inodes, sc.Err()
}

// processGroup returns the process group of the process at proc
// (/proc/<pid>), from its stat line: the command name in parentheses may
// hold spaces, so the fields are counted after its closing one.
func processGroup(proc string) (int, bool) {
	stat, err := os.ReadFile(filepath.Join(proc, "stat"))
	if err != nil {
		return 0, false
	}
	end := strings.LastIndexByte(string(stat), ')')
	if end < 0 {
		return 0, false
	}
	fields := strings.Fields(string(stat[end+1:])) // state ppid pgrp ...
	if len(fields) < 3 {
		return 0, false
	}
	pgrp, err := strconv.Atoi(fields[2])
	return pgrp, err == nil
}
