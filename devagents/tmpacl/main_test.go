package sec
import ("context";"testing";"time";"os";"github.com/etcd-nomad/etcd-nomad/devagents")
func TestACL(t *testing.T){
 ctx,cancel:=context.WithTimeout(context.Background(),2*time.Minute);defer cancel()
 d:=t.TempDir()
 c,err:=devagents.StartConsulWith(ctx,d+"/c",devagents.Options{ACL:true}); if err!=nil{t.Fatal(err)}
 defer c.Stop(10*time.Second)
 n,err:=devagents.StartNomadWith(ctx,d+"/n",c.Addr,devagents.Options{ACL:true,ConsulToken:c.Token}); if err!=nil{b,_:=os.ReadFile(d+"/n/nomad.log");t.Log(string(b));t.Fatal(err)}
 defer n.Stop(20*time.Second)
 t.Log(c.Addr,c.Token,n.Addr,n.Token)
}
