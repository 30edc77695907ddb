// A scrape target for the pprof receiver's tests: net/http/pprof on a
// loopback port of its own (printed as "listening on http://ADDR"), CPU
// work in main.burnSHA256 and allocations in main.allocBuffers, each far
// above anything else the process does.
package main

import (
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
	"sync"
	"time"
)

//go:noinline
func burnSHA256(seed []byte) [32]byte {
	sum := sha256.Sum256(seed)
	for i := 0; i < 20000; i++ {
		sum = sha256.Sum256(sum[:])
	}
	return sum
}

// kept holds a few buffers so that the heap's in-use profile has them too.
var kept [16][]byte

//go:noinline
func allocBuffers(round int) {
	for i := 0; i < 8; i++ {
		b := make([]byte, 64<<10)
		b[0] = byte(round)
		kept[(round+i)%len(kept)] = b
	}
}

// contend makes mutex and block profiles non-empty.
func contend() {
	var mu sync.Mutex
	for {
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				mu.Lock()
				time.Sleep(time.Millisecond)
				mu.Unlock()
			}()
		}
		wg.Wait()
		time.Sleep(50 * time.Millisecond)
	}
}

func main() {
	runtime.SetMutexProfileFraction(1)
	runtime.SetBlockProfileRate(int(time.Millisecond))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	go func() {
		seed := []byte("profcol")
		for {
			s := burnSHA256(seed)
			seed = s[:]
		}
	}()
	go func() {
		for round := 0; ; round++ {
			allocBuffers(round)
			time.Sleep(10 * time.Millisecond)
		}
	}()
	go contend()
	// Stops by itself, should the test that started it die first.
	go func() {
		time.Sleep(5 * time.Minute)
		os.Exit(0)
	}()
	if err := http.Serve(ln, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
