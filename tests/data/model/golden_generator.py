# Independent re-implementation of peerplan's request generator (mt19937_64, splitmix64 stream
# seeds, 53-bit uniforms), used to cross-check the golden values in tests/model/test_workload.cpp.
# Run: python3 tests/data/model/golden_generator.py
import math
M=(1<<64)-1
class MT64:
    def __init__(s,seed):
        s.mt=[0]*312; s.mt[0]=seed&M
        for i in range(1,312):
            s.mt[i]=(6364136223846793005*(s.mt[i-1]^(s.mt[i-1]>>62))+i)&M
        s.i=312
    def __call__(s):
        if s.i>=312:
            for k in range(312):
                y=(s.mt[k]&0xFFFFFFFF80000000)|(s.mt[(k+1)%312]&0x7FFFFFFF)
                s.mt[k]=s.mt[(k+156)%312]^(y>>1)^(0xB5026F5AA96619E9 if y&1 else 0)
            s.i=0
        y=s.mt[s.i]; s.i+=1
        y^=(y>>29)&0x5555555555555555
        y^=(y<<17)&0x71D67FFFEDA60000
        y^=(y<<37)&0xFFF7EEE000000000
        y^=y>>43
        return y&M
def stream_seed(seed,stream):
    z=(seed+0x9E3779B97F4A7C15*(stream+1))&M
    z=((z^(z>>30))*0xBF58476D1CE4E5B9)&M
    z=((z^(z>>27))*0x94D049BB133111EB)&M
    return z^(z>>31)
r=MT64(5489)
for i in range(9999): r()
print(r())
u=lambda g: (g()>>11)*2.0**-53
a=MT64(stream_seed(1,0)); p=MT64(stream_seed(1,1))
print(-math.log(1-u(a))/2)
for i in range(2): print(1+math.floor(u(p)*1000))
