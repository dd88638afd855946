package logthrottle

import (
	"testing"
	"time"
)

func TestThrottle(t *testing.T) {
	th := New(10 * time.Second)
	t0 := time.Unix(1000, 0)
	if ok, n := th.Allow("a", t0); !ok || n != 0 {
		t.Fatalf("first line: got %v %d", ok, n)
	}
	for i := range 3 {
		if ok, _ := th.Allow("a", t0.Add(time.Duration(i+1)*time.Second)); ok {
			t.Fatalf("line %d within the interval let through", i)
		}
	}
	if ok, _ := th.Allow("b", t0.Add(time.Second)); !ok {
		t.Fatal("another key is throttled on its own")
	}
	if ok, n := th.Allow("a", t0.Add(10*time.Second)); !ok || n != 3 {
		t.Fatalf("after the interval: got %v %d, want true 3", ok, n)
	}
}
