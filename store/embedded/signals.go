package embedded

import (
	"fmt"
	"syscall"
	"unsafe"
)

// deadlySignals are the signals whose handlers chDB installs (and, when told
// not to, resets to the default action). The Go runtime owns them: its
// SIGSEGV handler is what turns a nil dereference into a panic.
var deadlySignals = []syscall.Signal{
	syscall.SIGABRT, syscall.SIGSEGV, syscall.SIGILL, syscall.SIGBUS,
	syscall.SIGSYS, syscall.SIGFPE, syscall.SIGTSTP, syscall.SIGTRAP,
}

// kernelSigaction is the kernel's struct sigaction on linux/amd64 and arm64:
// handler, flags, restorer, and an 8-byte mask.
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

// keepGoSignalHandlers runs call — which disables chDB's signal handlers —
// and then puts the Go runtime's handlers back.
//
// chDB's own handlers for crash signals sleep for minutes before re-raising,
// so with them a Go nil dereference in budgetd hangs the process instead of
// panicking. Disabling them resets those signals to the default action,
// which would also lose Go's handlers; so Go's are saved first and
// restored after.
func keepGoSignalHandlers(call func()) error {
	saved := make([]kernelSigaction, len(deadlySignals))
	for i, sig := range deadlySignals {
		if err := rtSigaction(sig, nil, &saved[i]); err != nil {
			return fmt.Errorf("save handler of %v: %w", sig, err)
		}
	}
	call()
	for i, sig := range deadlySignals {
		if err := rtSigaction(sig, &saved[i], nil); err != nil {
			return fmt.Errorf("restore handler of %v: %w", sig, err)
		}
	}
	return nil
}

func rtSigaction(sig syscall.Signal, act, old *kernelSigaction) error {
	_, _, errno := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig),
		uintptr(unsafe.Pointer(act)), uintptr(unsafe.Pointer(old)), 8, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
