package app

import "testing"

func TestIsPowerOfTen(t *testing.T) {
	for n, want := range map[int]bool{1: true, 10: true, 100: true, 1000: true, 0: false, 2: false, 11: false, 20: false, 110: false, 1001: false} {
		if got := isPowerOfTen(n); got != want {
			t.Errorf("isPowerOfTen(%d) = %v, want %v", n, got, want)
		}
	}
}
