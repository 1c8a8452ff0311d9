//go:build !cgo || purego

package cpu

// cpool is empty without the C kernels: the workers wait and run every
// job in Go.
type cpool struct{}

func (c *cpool) start(n int) {}
func (c *cpool) ok() bool    { return false }
func (c *cpool) work(w int) bool {
	panic("cpu: C workers in a build without cgo")
}
func (c *cpool) tick()   {}
func (c *cpool) done()   {}
func (c *cpool) postGo() {}
func (c *cpool) wait()   {}
func (c *cpool) close()  {}
func (c *cpool) free()   {}
