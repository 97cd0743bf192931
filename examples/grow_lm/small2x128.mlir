module {
  hl.param @tok_emb.weight : tensor<65x128xf32> owner "tok_emb" init <normal>
  hl.param @pos_emb.weight : tensor<64x128xf32> owner "pos_emb" init <normal>
  hl.param @blocks.0.ln1.weight : tensor<128xf32> owner "blocks.0.ln1" init <ones>
  hl.param @blocks.0.ln1.bias : tensor<128xf32> owner "blocks.0.ln1" init <zeros>
  hl.param @blocks.0.attn.q_proj.weight : tensor<128x128xf32> owner "blocks.0.attn.q_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.0.attn.q_proj.bias : tensor<128xf32> owner "blocks.0.attn.q_proj" init <uniform, low = -0.088388347648318433, high = 0.088388347648318433>
  hl.param @blocks.0.attn.k_proj.weight : tensor<128x128xf32> owner "blocks.0.attn.k_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.0.attn.k_proj.bias : tensor<128xf32> owner "blocks.0.attn.k_proj" init <uniform, low = -0.088388347648318433, high = 0.088388347648318433>
  hl.param @blocks.0.attn.v_proj.weight : tensor<128x128xf32> owner "blocks.0.attn.v_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.0.attn.v_proj.bias : tensor<128xf32> owner "blocks.0.attn.v_proj" init <uniform, low = -0.088388347648318433, high = 0.088388347648318433>
  hl.param @blocks.0.attn.out_proj.weight : tensor<128x128xf32> owner "blocks.0.attn.out_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.0.attn.out_proj.bias : tensor<128xf32> owner "blocks.0.attn.out_proj" init <uniform, low = -0.088388347648318433, high = 0.088388347648318433>
  hl.param @blocks.0.ln2.weight : tensor<128xf32> owner "blocks.0.ln2" init <ones>
  hl.param @blocks.0.ln2.bias : tensor<128xf32> owner "blocks.0.ln2" init <zeros>
  hl.param @blocks.0.mlp.fc.weight : tensor<512x128xf32> owner "blocks.0.mlp.fc" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.0.mlp.fc.bias : tensor<512xf32> owner "blocks.0.mlp.fc" init <uniform, low = -0.088388347648318433, high = 0.088388347648318433>
  hl.param @blocks.0.mlp.proj.weight : tensor<128x512xf32> owner "blocks.0.mlp.proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.0.mlp.proj.bias : tensor<128xf32> owner "blocks.0.mlp.proj" init <uniform, low = -0.044194173824159216, high = 0.044194173824159216>
  hl.param @blocks.1.ln1.weight : tensor<128xf32> owner "blocks.1.ln1" init <ones>
  hl.param @blocks.1.ln1.bias : tensor<128xf32> owner "blocks.1.ln1" init <zeros>
  hl.param @blocks.1.attn.q_proj.weight : tensor<128x128xf32> owner "blocks.1.attn.q_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.1.attn.q_proj.bias : tensor<128xf32> owner "blocks.1.attn.q_proj" init <uniform, low = -0.088388347648318433, high = 0.088388347648318433>
  hl.param @blocks.1.attn.k_proj.weight : tensor<128x128xf32> owner "blocks.1.attn.k_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.1.attn.k_proj.bias : tensor<128xf32> owner "blocks.1.attn.k_proj" init <uniform, low = -0.088388347648318433, high = 0.088388347648318433>
  hl.param @blocks.1.attn.v_proj.weight : tensor<128x128xf32> owner "blocks.1.attn.v_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.1.attn.v_proj.bias : tensor<128xf32> owner "blocks.1.attn.v_proj" init <uniform, low = -0.088388347648318433, high = 0.088388347648318433>
  hl.param @blocks.1.attn.out_proj.weight : tensor<128x128xf32> owner "blocks.1.attn.out_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.1.attn.out_proj.bias : tensor<128xf32> owner "blocks.1.attn.out_proj" init <uniform, low = -0.088388347648318433, high = 0.088388347648318433>
  hl.param @blocks.1.ln2.weight : tensor<128xf32> owner "blocks.1.ln2" init <ones>
  hl.param @blocks.1.ln2.bias : tensor<128xf32> owner "blocks.1.ln2" init <zeros>
  hl.param @blocks.1.mlp.fc.weight : tensor<512x128xf32> owner "blocks.1.mlp.fc" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.1.mlp.fc.bias : tensor<512xf32> owner "blocks.1.mlp.fc" init <uniform, low = -0.088388347648318433, high = 0.088388347648318433>
  hl.param @blocks.1.mlp.proj.weight : tensor<128x512xf32> owner "blocks.1.mlp.proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.1.mlp.proj.bias : tensor<128xf32> owner "blocks.1.mlp.proj" init <uniform, low = -0.044194173824159216, high = 0.044194173824159216>
  hl.param @ln_f.weight : tensor<128xf32> owner "ln_f" init <ones>
  hl.param @ln_f.bias : tensor<128xf32> owner "ln_f" init <zeros>
  hl.param @lm_head.weight : tensor<65x128xf32> owner "lm_head" init <kaiming_uniform, gain = 0.57735026918962573>
  func.func @forward(%arg0: tensor<16x64xi32>) -> tensor<16x64x65xf32> {
    %0 = hl.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63]> : tensor<64xi32>
    %1 = hl.get_param @tok_emb.weight : tensor<65x128xf32>
    %2 = hl.gather %1[%arg0] axis = 0 : tensor<65x128xf32>, tensor<16x64xi32>
    %3 = hl.get_param @pos_emb.weight : tensor<64x128xf32>
    %4 = hl.gather %3[%0] axis = 0 : tensor<64x128xf32>, tensor<64xi32>
    %5 = hl.add %2, %4 : tensor<16x64x128xf32>, tensor<64x128xf32>
    %6 = hl.get_param @blocks.0.ln1.weight : tensor<128xf32>
    %7 = hl.get_param @blocks.0.ln1.bias : tensor<128xf32>
    %8 = hl.layer_norm %5 weight %6 bias %7 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %9 = hl.get_param @blocks.0.attn.q_proj.weight : tensor<128x128xf32>
    %10 = hl.get_param @blocks.0.attn.q_proj.bias : tensor<128xf32>
    %11 = hl.linear %8, %9, %10 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %12 = hl.reshape %11 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %13 = hl.transpose %12 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %14 = hl.get_param @blocks.0.attn.k_proj.weight : tensor<128x128xf32>
    %15 = hl.get_param @blocks.0.attn.k_proj.bias : tensor<128xf32>
    %16 = hl.linear %8, %14, %15 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %17 = hl.reshape %16 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %18 = hl.transpose %17 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %19 = hl.get_param @blocks.0.attn.v_proj.weight : tensor<128x128xf32>
    %20 = hl.get_param @blocks.0.attn.v_proj.bias : tensor<128xf32>
    %21 = hl.linear %8, %19, %20 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %22 = hl.reshape %21 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %23 = hl.transpose %22 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %24 = hl.attention %13, %18, %23 causal : tensor<16x4x64x32xf32>, tensor<16x4x64x32xf32>, tensor<16x4x64x32xf32>
    %25 = hl.transpose %24 permutation = [0, 2, 1, 3] : tensor<16x4x64x32xf32>
    %26 = hl.reshape %25 : tensor<16x64x4x32xf32> to tensor<16x64x128xf32>
    %27 = hl.get_param @blocks.0.attn.out_proj.weight : tensor<128x128xf32>
    %28 = hl.get_param @blocks.0.attn.out_proj.bias : tensor<128xf32>
    %29 = hl.linear %26, %27, %28 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %30 = hl.add %5, %29 : tensor<16x64x128xf32>, tensor<16x64x128xf32>
    %31 = hl.get_param @blocks.0.ln2.weight : tensor<128xf32>
    %32 = hl.get_param @blocks.0.ln2.bias : tensor<128xf32>
    %33 = hl.layer_norm %30 weight %31 bias %32 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %34 = hl.get_param @blocks.0.mlp.fc.weight : tensor<512x128xf32>
    %35 = hl.get_param @blocks.0.mlp.fc.bias : tensor<512xf32>
    %36 = hl.linear %33, %34, %35 : tensor<16x64x128xf32>, tensor<512x128xf32>, tensor<512xf32>
    %37 = hl.gelu %36 : tensor<16x64x512xf32>
    %38 = hl.get_param @blocks.0.mlp.proj.weight : tensor<128x512xf32>
    %39 = hl.get_param @blocks.0.mlp.proj.bias : tensor<128xf32>
    %40 = hl.linear %37, %38, %39 : tensor<16x64x512xf32>, tensor<128x512xf32>, tensor<128xf32>
    %41 = hl.add %30, %40 : tensor<16x64x128xf32>, tensor<16x64x128xf32>
    %42 = hl.get_param @blocks.1.ln1.weight : tensor<128xf32>
    %43 = hl.get_param @blocks.1.ln1.bias : tensor<128xf32>
    %44 = hl.layer_norm %41 weight %42 bias %43 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %45 = hl.get_param @blocks.1.attn.q_proj.weight : tensor<128x128xf32>
    %46 = hl.get_param @blocks.1.attn.q_proj.bias : tensor<128xf32>
    %47 = hl.linear %44, %45, %46 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %48 = hl.reshape %47 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %49 = hl.transpose %48 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %50 = hl.get_param @blocks.1.attn.k_proj.weight : tensor<128x128xf32>
    %51 = hl.get_param @blocks.1.attn.k_proj.bias : tensor<128xf32>
    %52 = hl.linear %44, %50, %51 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %53 = hl.reshape %52 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %54 = hl.transpose %53 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %55 = hl.get_param @blocks.1.attn.v_proj.weight : tensor<128x128xf32>
    %56 = hl.get_param @blocks.1.attn.v_proj.bias : tensor<128xf32>
    %57 = hl.linear %44, %55, %56 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %58 = hl.reshape %57 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %59 = hl.transpose %58 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %60 = hl.attention %49, %54, %59 causal : tensor<16x4x64x32xf32>, tensor<16x4x64x32xf32>, tensor<16x4x64x32xf32>
    %61 = hl.transpose %60 permutation = [0, 2, 1, 3] : tensor<16x4x64x32xf32>
    %62 = hl.reshape %61 : tensor<16x64x4x32xf32> to tensor<16x64x128xf32>
    %63 = hl.get_param @blocks.1.attn.out_proj.weight : tensor<128x128xf32>
    %64 = hl.get_param @blocks.1.attn.out_proj.bias : tensor<128xf32>
    %65 = hl.linear %62, %63, %64 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %66 = hl.add %41, %65 : tensor<16x64x128xf32>, tensor<16x64x128xf32>
    %67 = hl.get_param @blocks.1.ln2.weight : tensor<128xf32>
    %68 = hl.get_param @blocks.1.ln2.bias : tensor<128xf32>
    %69 = hl.layer_norm %66 weight %67 bias %68 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %70 = hl.get_param @blocks.1.mlp.fc.weight : tensor<512x128xf32>
    %71 = hl.get_param @blocks.1.mlp.fc.bias : tensor<512xf32>
    %72 = hl.linear %69, %70, %71 : tensor<16x64x128xf32>, tensor<512x128xf32>, tensor<512xf32>
    %73 = hl.gelu %72 : tensor<16x64x512xf32>
    %74 = hl.get_param @blocks.1.mlp.proj.weight : tensor<128x512xf32>
    %75 = hl.get_param @blocks.1.mlp.proj.bias : tensor<128xf32>
    %76 = hl.linear %73, %74, %75 : tensor<16x64x512xf32>, tensor<128x512xf32>, tensor<128xf32>
    %77 = hl.add %66, %76 : tensor<16x64x128xf32>, tensor<16x64x128xf32>
    %78 = hl.get_param @ln_f.weight : tensor<128xf32>
    %79 = hl.get_param @ln_f.bias : tensor<128xf32>
    %80 = hl.layer_norm %77 weight %78 bias %79 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %81 = hl.get_param @lm_head.weight : tensor<65x128xf32>
    %82 = hl.linear %80, %81 : tensor<16x64x128xf32>, tensor<65x128xf32>
    return %82 : tensor<16x64x65xf32>
  }
  func.func @loss(%arg0: tensor<16x64xi32>, %arg1: tensor<16x64xi32>) -> tensor<f32> {
    %0 = hl.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63]> : tensor<64xi32>
    %1 = hl.get_param @tok_emb.weight : tensor<65x128xf32>
    %2 = hl.gather %1[%arg0] axis = 0 : tensor<65x128xf32>, tensor<16x64xi32>
    %3 = hl.get_param @pos_emb.weight : tensor<64x128xf32>
    %4 = hl.gather %3[%0] axis = 0 : tensor<64x128xf32>, tensor<64xi32>
    %5 = hl.add %2, %4 : tensor<16x64x128xf32>, tensor<64x128xf32>
    %6 = hl.get_param @blocks.0.ln1.weight : tensor<128xf32>
    %7 = hl.get_param @blocks.0.ln1.bias : tensor<128xf32>
    %8 = hl.layer_norm %5 weight %6 bias %7 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %9 = hl.get_param @blocks.0.attn.q_proj.weight : tensor<128x128xf32>
    %10 = hl.get_param @blocks.0.attn.q_proj.bias : tensor<128xf32>
    %11 = hl.linear %8, %9, %10 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %12 = hl.reshape %11 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %13 = hl.transpose %12 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %14 = hl.get_param @blocks.0.attn.k_proj.weight : tensor<128x128xf32>
    %15 = hl.get_param @blocks.0.attn.k_proj.bias : tensor<128xf32>
    %16 = hl.linear %8, %14, %15 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %17 = hl.reshape %16 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %18 = hl.transpose %17 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %19 = hl.get_param @blocks.0.attn.v_proj.weight : tensor<128x128xf32>
    %20 = hl.get_param @blocks.0.attn.v_proj.bias : tensor<128xf32>
    %21 = hl.linear %8, %19, %20 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %22 = hl.reshape %21 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %23 = hl.transpose %22 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %24 = hl.attention %13, %18, %23 causal : tensor<16x4x64x32xf32>, tensor<16x4x64x32xf32>, tensor<16x4x64x32xf32>
    %25 = hl.transpose %24 permutation = [0, 2, 1, 3] : tensor<16x4x64x32xf32>
    %26 = hl.reshape %25 : tensor<16x64x4x32xf32> to tensor<16x64x128xf32>
    %27 = hl.get_param @blocks.0.attn.out_proj.weight : tensor<128x128xf32>
    %28 = hl.get_param @blocks.0.attn.out_proj.bias : tensor<128xf32>
    %29 = hl.linear %26, %27, %28 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %30 = hl.add %5, %29 : tensor<16x64x128xf32>, tensor<16x64x128xf32>
    %31 = hl.get_param @blocks.0.ln2.weight : tensor<128xf32>
    %32 = hl.get_param @blocks.0.ln2.bias : tensor<128xf32>
    %33 = hl.layer_norm %30 weight %31 bias %32 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %34 = hl.get_param @blocks.0.mlp.fc.weight : tensor<512x128xf32>
    %35 = hl.get_param @blocks.0.mlp.fc.bias : tensor<512xf32>
    %36 = hl.linear %33, %34, %35 : tensor<16x64x128xf32>, tensor<512x128xf32>, tensor<512xf32>
    %37 = hl.gelu %36 : tensor<16x64x512xf32>
    %38 = hl.get_param @blocks.0.mlp.proj.weight : tensor<128x512xf32>
    %39 = hl.get_param @blocks.0.mlp.proj.bias : tensor<128xf32>
    %40 = hl.linear %37, %38, %39 : tensor<16x64x512xf32>, tensor<128x512xf32>, tensor<128xf32>
    %41 = hl.add %30, %40 : tensor<16x64x128xf32>, tensor<16x64x128xf32>
    %42 = hl.get_param @blocks.1.ln1.weight : tensor<128xf32>
    %43 = hl.get_param @blocks.1.ln1.bias : tensor<128xf32>
    %44 = hl.layer_norm %41 weight %42 bias %43 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %45 = hl.get_param @blocks.1.attn.q_proj.weight : tensor<128x128xf32>
    %46 = hl.get_param @blocks.1.attn.q_proj.bias : tensor<128xf32>
    %47 = hl.linear %44, %45, %46 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %48 = hl.reshape %47 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %49 = hl.transpose %48 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %50 = hl.get_param @blocks.1.attn.k_proj.weight : tensor<128x128xf32>
    %51 = hl.get_param @blocks.1.attn.k_proj.bias : tensor<128xf32>
    %52 = hl.linear %44, %50, %51 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %53 = hl.reshape %52 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %54 = hl.transpose %53 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %55 = hl.get_param @blocks.1.attn.v_proj.weight : tensor<128x128xf32>
    %56 = hl.get_param @blocks.1.attn.v_proj.bias : tensor<128xf32>
    %57 = hl.linear %44, %55, %56 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %58 = hl.reshape %57 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %59 = hl.transpose %58 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %60 = hl.attention %49, %54, %59 causal : tensor<16x4x64x32xf32>, tensor<16x4x64x32xf32>, tensor<16x4x64x32xf32>
    %61 = hl.transpose %60 permutation = [0, 2, 1, 3] : tensor<16x4x64x32xf32>
    %62 = hl.reshape %61 : tensor<16x64x4x32xf32> to tensor<16x64x128xf32>
    %63 = hl.get_param @blocks.1.attn.out_proj.weight : tensor<128x128xf32>
    %64 = hl.get_param @blocks.1.attn.out_proj.bias : tensor<128xf32>
    %65 = hl.linear %62, %63, %64 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %66 = hl.add %41, %65 : tensor<16x64x128xf32>, tensor<16x64x128xf32>
    %67 = hl.get_param @blocks.1.ln2.weight : tensor<128xf32>
    %68 = hl.get_param @blocks.1.ln2.bias : tensor<128xf32>
    %69 = hl.layer_norm %66 weight %67 bias %68 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %70 = hl.get_param @blocks.1.mlp.fc.weight : tensor<512x128xf32>
    %71 = hl.get_param @blocks.1.mlp.fc.bias : tensor<512xf32>
    %72 = hl.linear %69, %70, %71 : tensor<16x64x128xf32>, tensor<512x128xf32>, tensor<512xf32>
    %73 = hl.gelu %72 : tensor<16x64x512xf32>
    %74 = hl.get_param @blocks.1.mlp.proj.weight : tensor<128x512xf32>
    %75 = hl.get_param @blocks.1.mlp.proj.bias : tensor<128xf32>
    %76 = hl.linear %73, %74, %75 : tensor<16x64x512xf32>, tensor<128x512xf32>, tensor<128xf32>
    %77 = hl.add %66, %76 : tensor<16x64x128xf32>, tensor<16x64x128xf32>
    %78 = hl.get_param @ln_f.weight : tensor<128xf32>
    %79 = hl.get_param @ln_f.bias : tensor<128xf32>
    %80 = hl.layer_norm %77 weight %78 bias %79 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %81 = hl.get_param @lm_head.weight : tensor<65x128xf32>
    %82 = hl.linear %80, %81 : tensor<16x64x128xf32>, tensor<65x128xf32>
    %83 = hl.cross_entropy %82, %arg1 : tensor<16x64x65xf32>, tensor<16x64xi32>
    return %83 : tensor<f32>
  }
}
