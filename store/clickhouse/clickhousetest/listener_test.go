package clickhousetest

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// TestListensOn: a listener of this process's group is found on its port;
// none is found once it is closed.
func TestListensOn(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if ours, err := listensOn(syscall.Getpgrp(), port); err != nil || !ours {
		t.Fatalf("listensOn(own group, %d) = %v, %v; want true", port, ours, err)
	}
	if ours, err := listensOn(syscall.Getpgrp()+1_000_000, port); err != nil || ours {
		t.Fatalf("listensOn(another group, %d) = %v, %v; want false", port, ours, err)
	}
	l.Close()
	if ours, err := listensOn(syscall.Getpgrp(), port); err != nil || ours {
		t.Fatalf("listensOn(own group, closed %d) = %v, %v; want false", port, ours, err)
	}
}

// TestStartRefusesAStrangersListener: when another process took the
// server's port after it was found free, Start reports ErrPortTaken (the
// server exits, StartIn tries other ports) rather than handing the test a
// server that is not the one it started.
func TestStartRefusesAStrangersListener(t *testing.T) {
	stranger, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.tcpPort = stranger.Addr().(*net.TCPAddr).Port
	if err := s.WriteConfig("", ""); err != nil {
		t.Fatal(err)
	}
	err = s.Start()
	if err == nil {
		_ = s.Stop()
		t.Fatal("Start took a stranger's listener for the server's")
	}
	if !errors.Is(err, ErrPortTaken) {
		t.Fatalf("Start = %v; want ErrPortTaken", err)
	}
}
