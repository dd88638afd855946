package embedded

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// releaseStartupPages asks the kernel to reclaim the pages of libchdb
// that are in memory and unmodified: its code and read-only data.
//
// Starting chDB runs code from much of the library once (every function,
// format, table engine and setting registers itself), and those pages
// stay resident, in the process's RSS, for its whole life: 186 MiB of the
// library after a start, against 100–110 MiB that serving spans keeps
// using (docs/performance.md, step 41). MADV_PAGEOUT drops them now; a
// page that is used again is read back from the file the first time.
// Pages the process modified (relocations, data) are left alone: without
// swap they could not be reclaimed, and with it they would be swapped.
// A kernel without MADV_PAGEOUT (before 5.4) refuses it, which changes
// nothing.
//
// It returns the bytes it advised.
func releaseStartupPages(libPath string) (int, error) {
	path, err := filepath.EvalSymlinks(libPath)
	if err != nil {
		return 0, fmt.Errorf("release chDB's start-up pages: %w", err)
	}
	path, err = filepath.Abs(path)
	if err != nil {
		return 0, fmt.Errorf("release chDB's start-up pages: %w", err)
	}
	ranges, err := cleanMappings("/proc/self/smaps", path)
	if err != nil {
		return 0, fmt.Errorf("release chDB's start-up pages: %w", err)
	}
	advised := 0
	for _, r := range ranges {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, r.start, r.end-r.start, unix.MADV_PAGEOUT); errno != 0 {
			return advised, fmt.Errorf("release chDB's start-up pages: madvise: %w", errno)
		}
		advised += int(r.end - r.start)
	}
	return advised, nil
}

// mapping is an address range of the process, [start, end).
type mapping struct{ start, end uintptr }

// cleanMappings reads an smaps file and returns the mappings of the file
// at path that hold no page the process modified (Private_Dirty 0 kB).
func cleanMappings(smaps, path string) ([]mapping, error) {
	f, err := os.Open(smaps)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mapping
	var cur *mapping // the current mapping, while it is one of path's
	dirty := false
	flush := func() {
		if cur != nil && !dirty {
			out = append(out, *cur)
		}
		cur, dirty = nil, false
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		if header, ok := mappingHeader(line); ok {
			flush()
			fields := strings.Fields(header)
			if len(fields) < 6 || strings.Join(fields[5:], " ") != path {
				continue
			}
			lo, hi, _ := strings.Cut(fields[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("%s: bad range %q", smaps, fields[0])
			}
			cur = &mapping{start: uintptr(start), end: uintptr(end)}
			continue
		}
		if cur != nil && bytes.HasPrefix(line, []byte("Private_Dirty:")) {
			dirty = strings.TrimSpace(string(line[len("Private_Dirty:"):])) != "0 kB"
		}
	}
	flush()
	return out, sc.Err()
}

// mappingHeader reports whether an smaps line starts a mapping (it begins
// with an address range, "7f…-7f… "), and returns it.
func mappingHeader(line []byte) (string, bool) {
	dash := bytes.IndexByte(line, '-')
	space := bytes.IndexByte(line, ' ')
	if dash <= 0 || space <= dash {
		return "", false
	}
	for _, c := range line[:space] {
		if c != '-' && !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", false
		}
	}
	return string(line), true
}
