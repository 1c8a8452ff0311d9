package main
import ("fmt";"os";"arborist/engine/gguf")
func main(){ for _,p:=range os.Args[1:]{ f,err:=gguf.Open(p); if err!=nil{fmt.Println(err);continue}
 fmt.Println(p,f.Version,len(f.Tensors))
 for _,kv:=range f.KV{ s:=fmt.Sprint(kv.Value); if len(s)>100{s=s[:100]}; fmt.Println(" ",kv.Key,kv.Type,s)}
 for i,t:=range f.Tensors{ if i<14 {fmt.Println("  T",t.Name,t.Dims,t.Type)}}
}}
