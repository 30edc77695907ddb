// A pyroscope-go client for the pyroscope receiver's tests: profiles
// itself with the SDK, pushing to the server given as the first argument,
// while main.burnSHA256 burns CPU (tagged handler=worker) and
// main.allocBuffers allocates, for the duration given as the second
// argument; then stops the profiler, which uploads what is left.
package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"time"

	"github.com/grafana/pyroscope-go"
)

//go:noinline
func burnSHA256(seed []byte) [32]byte {
	sum := sha256.Sum256(seed)
	for i := 0; i < 20000; i++ {
		sum = sha256.Sum256(sum[:])
	}
	return sum
}

var kept [16][]byte

//go:noinline
func allocBuffers(round int) {
	for i := 0; i < 8; i++ {
		b := make([]byte, 64<<10)
		b[0] = byte(round)
		kept[(round+i)%len(kept)] = b
	}
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: pyroscope_go SERVER_ADDRESS DURATION")
		os.Exit(2)
	}
	run, err := time.ParseDuration(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	profiler, err := pyroscope.Start(pyroscope.Config{
		ApplicationName: "profcol.pyroscope-go",
		ServerAddress:   os.Args[1],
		Tags:            map[string]string{"region": "eu", "env": "test"},
		UploadRate:      2 * time.Second,
		Logger:          pyroscope.StandardLogger,
		ProfileTypes: []pyroscope.ProfileType{
			pyroscope.ProfileCPU,
			pyroscope.ProfileAllocObjects,
			pyroscope.ProfileAllocSpace,
			pyroscope.ProfileInuseObjects,
			pyroscope.ProfileInuseSpace,
			pyroscope.ProfileGoroutines,
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	done := time.Now().Add(run)
	go func() {
		for round := 0; time.Now().Before(done); round++ {
			allocBuffers(round)
			time.Sleep(10 * time.Millisecond)
		}
	}()
	pyroscope.TagWrapper(context.Background(), pyroscope.Labels("handler", "worker"), func(context.Context) {
		seed := []byte("profcol")
		for time.Now().Before(done) {
			s := burnSHA256(seed)
			seed = s[:]
		}
	})
	if err := profiler.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
