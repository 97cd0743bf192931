import numpy as np, sys
rng = np.random.default_rng(1)
# MLP: 32 x 64 features in [0,1], labels 0..9
x = rng.random((32,64), dtype=np.float32)
y = rng.integers(0,10,32).astype(np.int32)
np.save('mlp_x.npy', x); np.save('mlp_y.npy', y)
# CNN: 32x1x8x8
np.save('cnn_x.npy', rng.random((32,1,8,8), dtype=np.float32)); np.save('cnn_y.npy', rng.integers(0,10,32).astype(np.int32))
# char LM: 16x64 ids in 0..64, targets
t = rng.integers(0,65,(16,65)).astype(np.int32)
np.save('lm_x.npy', t[:,:64].copy()); np.save('lm_y.npy', t[:,1:].copy())
# transformer: 8x128x256 float, targets 8x128 in 0..255
np.save('tb_x.npy', rng.standard_normal((8,128,256), dtype=np.float32)); np.save('tb_y.npy', rng.integers(0,256,(8,128)).astype(np.int32))
