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
  hl.param @blocks.2.ln1.weight : tensor<128xf32> owner "blocks.2.ln1" init <ones>
  hl.param @blocks.2.ln1.bias : tensor<128xf32> owner "blocks.2.ln1" init <zeros>
  hl.param @blocks.2.attn.q_proj.weight : tensor<128x128xf32> owner "blocks.2.attn.q_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.2.attn.q_proj.bias : tensor<128xf32> owner "blocks.2.attn.q_proj" init <uniform, low = -0.088388347648318433, high = 0.088388347648318433>
  hl.param @blocks.2.attn.k_proj.weight : tensor<128x128xf32> owner "blocks.2.attn.k_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.2.attn.k_proj.bias : tensor<128xf32> owner "blocks.2.attn.k_proj" init <uniform, low = -0.088388347648318433, high = 0.088388347648318433>
  hl.param @blocks.2.attn.v_proj.weight : tensor<128x128xf32> owner "blocks.2.attn.v_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.2.attn.v_proj.bias : tensor<128xf32> owner "blocks.2.attn.v_proj" init <uniform, low = -0.088388347648318433, high = 0.088388347648318433>
  hl.param @blocks.2.attn.out_proj.weight : tensor<128x128xf32> owner "blocks.2.attn.out_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.2.attn.out_proj.bias : tensor<128xf32> owner "blocks.2.attn.out_proj" init <uniform, low = -0.088388347648318433, high = 0.088388347648318433>
  hl.param @blocks.2.ln2.weight : tensor<128xf32> owner "blocks.2.ln2" init <ones>
  hl.param @blocks.2.ln2.bias : tensor<128xf32> owner "blocks.2.ln2" init <zeros>
  hl.param @blocks.2.mlp.fc.weight : tensor<512x128xf32> owner "blocks.2.mlp.fc" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.2.mlp.fc.bias : tensor<512xf32> owner "blocks.2.mlp.fc" init <uniform, low = -0.088388347648318433, high = 0.088388347648318433>
  hl.param @blocks.2.mlp.proj.weight : tensor<128x512xf32> owner "blocks.2.mlp.proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.2.mlp.proj.bias : tensor<128xf32> owner "blocks.2.mlp.proj" init <uniform, low = -0.044194173824159216, high = 0.044194173824159216>
  hl.param @blocks.3.ln1.weight : tensor<128xf32> owner "blocks.3.ln1" init <ones>
  hl.param @blocks.3.ln1.bias : tensor<128xf32> owner "blocks.3.ln1" init <zeros>
  hl.param @blocks.3.attn.q_proj.weight : tensor<128x128xf32> owner "blocks.3.attn.q_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.3.attn.q_proj.bias : tensor<128xf32> owner "blocks.3.attn.q_proj" init <uniform, low = -0.088388347648318433, high = 0.088388347648318433>
  hl.param @blocks.3.attn.k_proj.weight : tensor<128x128xf32> owner "blocks.3.attn.k_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.3.attn.k_proj.bias : tensor<128xf32> owner "blocks.3.attn.k_proj" init <uniform, low = -0.088388347648318433, high = 0.088388347648318433>
  hl.param @blocks.3.attn.v_proj.weight : tensor<128x128xf32> owner "blocks.3.attn.v_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.3.attn.v_proj.bias : tensor<128xf32> owner "blocks.3.attn.v_proj" init <uniform, low = -0.088388347648318433, high = 0.088388347648318433>
  hl.param @blocks.3.attn.out_proj.weight : tensor<128x128xf32> owner "blocks.3.attn.out_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.3.attn.out_proj.bias : tensor<128xf32> owner "blocks.3.attn.out_proj" init <uniform, low = -0.088388347648318433, high = 0.088388347648318433>
  hl.param @blocks.3.ln2.weight : tensor<128xf32> owner "blocks.3.ln2" init <ones>
  hl.param @blocks.3.ln2.bias : tensor<128xf32> owner "blocks.3.ln2" init <zeros>
  hl.param @blocks.3.mlp.fc.weight : tensor<512x128xf32> owner "blocks.3.mlp.fc" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.3.mlp.fc.bias : tensor<512xf32> owner "blocks.3.mlp.fc" init <uniform, low = -0.088388347648318433, high = 0.088388347648318433>
  hl.param @blocks.3.mlp.proj.weight : tensor<128x512xf32> owner "blocks.3.mlp.proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.3.mlp.proj.bias : tensor<128xf32> owner "blocks.3.mlp.proj" init <uniform, low = -0.044194173824159216, high = 0.044194173824159216>
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
    %78 = hl.get_param @blocks.2.ln1.weight : tensor<128xf32>
    %79 = hl.get_param @blocks.2.ln1.bias : tensor<128xf32>
    %80 = hl.layer_norm %77 weight %78 bias %79 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %81 = hl.get_param @blocks.2.attn.q_proj.weight : tensor<128x128xf32>
    %82 = hl.get_param @blocks.2.attn.q_proj.bias : tensor<128xf32>
    %83 = hl.linear %80, %81, %82 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %84 = hl.reshape %83 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %85 = hl.transpose %84 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %86 = hl.get_param @blocks.2.attn.k_proj.weight : tensor<128x128xf32>
    %87 = hl.get_param @blocks.2.attn.k_proj.bias : tensor<128xf32>
    %88 = hl.linear %80, %86, %87 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %89 = hl.reshape %88 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %90 = hl.transpose %89 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %91 = hl.get_param @blocks.2.attn.v_proj.weight : tensor<128x128xf32>
    %92 = hl.get_param @blocks.2.attn.v_proj.bias : tensor<128xf32>
    %93 = hl.linear %80, %91, %92 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %94 = hl.reshape %93 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %95 = hl.transpose %94 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %96 = hl.attention %85, %90, %95 causal : tensor<16x4x64x32xf32>, tensor<16x4x64x32xf32>, tensor<16x4x64x32xf32>
    %97 = hl.transpose %96 permutation = [0, 2, 1, 3] : tensor<16x4x64x32xf32>
    %98 = hl.reshape %97 : tensor<16x64x4x32xf32> to tensor<16x64x128xf32>
    %99 = hl.get_param @blocks.2.attn.out_proj.weight : tensor<128x128xf32>
    %100 = hl.get_param @blocks.2.attn.out_proj.bias : tensor<128xf32>
    %101 = hl.linear %98, %99, %100 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %102 = hl.add %77, %101 : tensor<16x64x128xf32>, tensor<16x64x128xf32>
    %103 = hl.get_param @blocks.2.ln2.weight : tensor<128xf32>
    %104 = hl.get_param @blocks.2.ln2.bias : tensor<128xf32>
    %105 = hl.layer_norm %102 weight %103 bias %104 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %106 = hl.get_param @blocks.2.mlp.fc.weight : tensor<512x128xf32>
    %107 = hl.get_param @blocks.2.mlp.fc.bias : tensor<512xf32>
    %108 = hl.linear %105, %106, %107 : tensor<16x64x128xf32>, tensor<512x128xf32>, tensor<512xf32>
    %109 = hl.gelu %108 : tensor<16x64x512xf32>
    %110 = hl.get_param @blocks.2.mlp.proj.weight : tensor<128x512xf32>
    %111 = hl.get_param @blocks.2.mlp.proj.bias : tensor<128xf32>
    %112 = hl.linear %109, %110, %111 : tensor<16x64x512xf32>, tensor<128x512xf32>, tensor<128xf32>
    %113 = hl.add %102, %112 : tensor<16x64x128xf32>, tensor<16x64x128xf32>
    %114 = hl.get_param @blocks.3.ln1.weight : tensor<128xf32>
    %115 = hl.get_param @blocks.3.ln1.bias : tensor<128xf32>
    %116 = hl.layer_norm %113 weight %114 bias %115 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %117 = hl.get_param @blocks.3.attn.q_proj.weight : tensor<128x128xf32>
    %118 = hl.get_param @blocks.3.attn.q_proj.bias : tensor<128xf32>
    %119 = hl.linear %116, %117, %118 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %120 = hl.reshape %119 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %121 = hl.transpose %120 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %122 = hl.get_param @blocks.3.attn.k_proj.weight : tensor<128x128xf32>
    %123 = hl.get_param @blocks.3.attn.k_proj.bias : tensor<128xf32>
    %124 = hl.linear %116, %122, %123 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %125 = hl.reshape %124 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %126 = hl.transpose %125 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %127 = hl.get_param @blocks.3.attn.v_proj.weight : tensor<128x128xf32>
    %128 = hl.get_param @blocks.3.attn.v_proj.bias : tensor<128xf32>
    %129 = hl.linear %116, %127, %128 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %130 = hl.reshape %129 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %131 = hl.transpose %130 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %132 = hl.attention %121, %126, %131 causal : tensor<16x4x64x32xf32>, tensor<16x4x64x32xf32>, tensor<16x4x64x32xf32>
    %133 = hl.transpose %132 permutation = [0, 2, 1, 3] : tensor<16x4x64x32xf32>
    %134 = hl.reshape %133 : tensor<16x64x4x32xf32> to tensor<16x64x128xf32>
    %135 = hl.get_param @blocks.3.attn.out_proj.weight : tensor<128x128xf32>
    %136 = hl.get_param @blocks.3.attn.out_proj.bias : tensor<128xf32>
    %137 = hl.linear %134, %135, %136 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %138 = hl.add %113, %137 : tensor<16x64x128xf32>, tensor<16x64x128xf32>
    %139 = hl.get_param @blocks.3.ln2.weight : tensor<128xf32>
    %140 = hl.get_param @blocks.3.ln2.bias : tensor<128xf32>
    %141 = hl.layer_norm %138 weight %139 bias %140 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %142 = hl.get_param @blocks.3.mlp.fc.weight : tensor<512x128xf32>
    %143 = hl.get_param @blocks.3.mlp.fc.bias : tensor<512xf32>
    %144 = hl.linear %141, %142, %143 : tensor<16x64x128xf32>, tensor<512x128xf32>, tensor<512xf32>
    %145 = hl.gelu %144 : tensor<16x64x512xf32>
    %146 = hl.get_param @blocks.3.mlp.proj.weight : tensor<128x512xf32>
    %147 = hl.get_param @blocks.3.mlp.proj.bias : tensor<128xf32>
    %148 = hl.linear %145, %146, %147 : tensor<16x64x512xf32>, tensor<128x512xf32>, tensor<128xf32>
    %149 = hl.add %138, %148 : tensor<16x64x128xf32>, tensor<16x64x128xf32>
    %150 = hl.get_param @ln_f.weight : tensor<128xf32>
    %151 = hl.get_param @ln_f.bias : tensor<128xf32>
    %152 = hl.layer_norm %149 weight %150 bias %151 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %153 = hl.get_param @lm_head.weight : tensor<65x128xf32>
    %154 = hl.linear %152, %153 : tensor<16x64x128xf32>, tensor<65x128xf32>
    return %154 : tensor<16x64x65xf32>
  }
  func.func @loss(%arg0: tensor<16x64xi32>, %arg1: tensor<16x64xi32>, %arg2: tensor<i64>, %arg3: tensor<i64>) -> tensor<f32> {
    %0 = hl.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63]> : tensor<64xi32>
    %1 = hl.get_param @tok_emb.weight : tensor<65x128xf32>
    %2 = hl.gather %1[%arg0] axis = 0 : tensor<65x128xf32>, tensor<16x64xi32>
    %3 = hl.get_param @pos_emb.weight : tensor<64x128xf32>
    %4 = hl.gather %3[%0] axis = 0 : tensor<64x128xf32>, tensor<64xi32>
    %5 = hl.add %2, %4 : tensor<16x64x128xf32>, tensor<64x128xf32>
    %6 = hl.dropout %5, %arg2, %arg3 p = 1.000000e-01 stream = 0 : tensor<16x64x128xf32>
    %7 = hl.get_param @blocks.0.ln1.weight : tensor<128xf32>
    %8 = hl.get_param @blocks.0.ln1.bias : tensor<128xf32>
    %9 = hl.layer_norm %6 weight %7 bias %8 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %10 = hl.get_param @blocks.0.attn.q_proj.weight : tensor<128x128xf32>
    %11 = hl.get_param @blocks.0.attn.q_proj.bias : tensor<128xf32>
    %12 = hl.linear %9, %10, %11 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %13 = hl.reshape %12 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %14 = hl.transpose %13 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %15 = hl.get_param @blocks.0.attn.k_proj.weight : tensor<128x128xf32>
    %16 = hl.get_param @blocks.0.attn.k_proj.bias : tensor<128xf32>
    %17 = hl.linear %9, %15, %16 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %18 = hl.reshape %17 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %19 = hl.transpose %18 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %20 = hl.get_param @blocks.0.attn.v_proj.weight : tensor<128x128xf32>
    %21 = hl.get_param @blocks.0.attn.v_proj.bias : tensor<128xf32>
    %22 = hl.linear %9, %20, %21 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %23 = hl.reshape %22 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %24 = hl.transpose %23 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %25 = hl.attention %14, %19, %24 causal : tensor<16x4x64x32xf32>, tensor<16x4x64x32xf32>, tensor<16x4x64x32xf32>
    %26 = hl.transpose %25 permutation = [0, 2, 1, 3] : tensor<16x4x64x32xf32>
    %27 = hl.reshape %26 : tensor<16x64x4x32xf32> to tensor<16x64x128xf32>
    %28 = hl.get_param @blocks.0.attn.out_proj.weight : tensor<128x128xf32>
    %29 = hl.get_param @blocks.0.attn.out_proj.bias : tensor<128xf32>
    %30 = hl.linear %27, %28, %29 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %31 = hl.dropout %30, %arg2, %arg3 p = 1.000000e-01 stream = 1 : tensor<16x64x128xf32>
    %32 = hl.add %6, %31 : tensor<16x64x128xf32>, tensor<16x64x128xf32>
    %33 = hl.get_param @blocks.0.ln2.weight : tensor<128xf32>
    %34 = hl.get_param @blocks.0.ln2.bias : tensor<128xf32>
    %35 = hl.layer_norm %32 weight %33 bias %34 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %36 = hl.get_param @blocks.0.mlp.fc.weight : tensor<512x128xf32>
    %37 = hl.get_param @blocks.0.mlp.fc.bias : tensor<512xf32>
    %38 = hl.linear %35, %36, %37 : tensor<16x64x128xf32>, tensor<512x128xf32>, tensor<512xf32>
    %39 = hl.gelu %38 : tensor<16x64x512xf32>
    %40 = hl.get_param @blocks.0.mlp.proj.weight : tensor<128x512xf32>
    %41 = hl.get_param @blocks.0.mlp.proj.bias : tensor<128xf32>
    %42 = hl.linear %39, %40, %41 : tensor<16x64x512xf32>, tensor<128x512xf32>, tensor<128xf32>
    %43 = hl.dropout %42, %arg2, %arg3 p = 1.000000e-01 stream = 2 : tensor<16x64x128xf32>
    %44 = hl.add %32, %43 : tensor<16x64x128xf32>, tensor<16x64x128xf32>
    %45 = hl.get_param @blocks.1.ln1.weight : tensor<128xf32>
    %46 = hl.get_param @blocks.1.ln1.bias : tensor<128xf32>
    %47 = hl.layer_norm %44 weight %45 bias %46 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %48 = hl.get_param @blocks.1.attn.q_proj.weight : tensor<128x128xf32>
    %49 = hl.get_param @blocks.1.attn.q_proj.bias : tensor<128xf32>
    %50 = hl.linear %47, %48, %49 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %51 = hl.reshape %50 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %52 = hl.transpose %51 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %53 = hl.get_param @blocks.1.attn.k_proj.weight : tensor<128x128xf32>
    %54 = hl.get_param @blocks.1.attn.k_proj.bias : tensor<128xf32>
    %55 = hl.linear %47, %53, %54 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %56 = hl.reshape %55 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %57 = hl.transpose %56 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %58 = hl.get_param @blocks.1.attn.v_proj.weight : tensor<128x128xf32>
    %59 = hl.get_param @blocks.1.attn.v_proj.bias : tensor<128xf32>
    %60 = hl.linear %47, %58, %59 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %61 = hl.reshape %60 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %62 = hl.transpose %61 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %63 = hl.attention %52, %57, %62 causal : tensor<16x4x64x32xf32>, tensor<16x4x64x32xf32>, tensor<16x4x64x32xf32>
    %64 = hl.transpose %63 permutation = [0, 2, 1, 3] : tensor<16x4x64x32xf32>
    %65 = hl.reshape %64 : tensor<16x64x4x32xf32> to tensor<16x64x128xf32>
    %66 = hl.get_param @blocks.1.attn.out_proj.weight : tensor<128x128xf32>
    %67 = hl.get_param @blocks.1.attn.out_proj.bias : tensor<128xf32>
    %68 = hl.linear %65, %66, %67 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %69 = hl.dropout %68, %arg2, %arg3 p = 1.000000e-01 stream = 3 : tensor<16x64x128xf32>
    %70 = hl.add %44, %69 : tensor<16x64x128xf32>, tensor<16x64x128xf32>
    %71 = hl.get_param @blocks.1.ln2.weight : tensor<128xf32>
    %72 = hl.get_param @blocks.1.ln2.bias : tensor<128xf32>
    %73 = hl.layer_norm %70 weight %71 bias %72 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %74 = hl.get_param @blocks.1.mlp.fc.weight : tensor<512x128xf32>
    %75 = hl.get_param @blocks.1.mlp.fc.bias : tensor<512xf32>
    %76 = hl.linear %73, %74, %75 : tensor<16x64x128xf32>, tensor<512x128xf32>, tensor<512xf32>
    %77 = hl.gelu %76 : tensor<16x64x512xf32>
    %78 = hl.get_param @blocks.1.mlp.proj.weight : tensor<128x512xf32>
    %79 = hl.get_param @blocks.1.mlp.proj.bias : tensor<128xf32>
    %80 = hl.linear %77, %78, %79 : tensor<16x64x512xf32>, tensor<128x512xf32>, tensor<128xf32>
    %81 = hl.dropout %80, %arg2, %arg3 p = 1.000000e-01 stream = 4 : tensor<16x64x128xf32>
    %82 = hl.add %70, %81 : tensor<16x64x128xf32>, tensor<16x64x128xf32>
    %83 = hl.get_param @blocks.2.ln1.weight : tensor<128xf32>
    %84 = hl.get_param @blocks.2.ln1.bias : tensor<128xf32>
    %85 = hl.layer_norm %82 weight %83 bias %84 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %86 = hl.get_param @blocks.2.attn.q_proj.weight : tensor<128x128xf32>
    %87 = hl.get_param @blocks.2.attn.q_proj.bias : tensor<128xf32>
    %88 = hl.linear %85, %86, %87 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %89 = hl.reshape %88 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %90 = hl.transpose %89 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %91 = hl.get_param @blocks.2.attn.k_proj.weight : tensor<128x128xf32>
    %92 = hl.get_param @blocks.2.attn.k_proj.bias : tensor<128xf32>
    %93 = hl.linear %85, %91, %92 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %94 = hl.reshape %93 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %95 = hl.transpose %94 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %96 = hl.get_param @blocks.2.attn.v_proj.weight : tensor<128x128xf32>
    %97 = hl.get_param @blocks.2.attn.v_proj.bias : tensor<128xf32>
    %98 = hl.linear %85, %96, %97 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %99 = hl.reshape %98 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %100 = hl.transpose %99 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %101 = hl.attention %90, %95, %100 causal : tensor<16x4x64x32xf32>, tensor<16x4x64x32xf32>, tensor<16x4x64x32xf32>
    %102 = hl.transpose %101 permutation = [0, 2, 1, 3] : tensor<16x4x64x32xf32>
    %103 = hl.reshape %102 : tensor<16x64x4x32xf32> to tensor<16x64x128xf32>
    %104 = hl.get_param @blocks.2.attn.out_proj.weight : tensor<128x128xf32>
    %105 = hl.get_param @blocks.2.attn.out_proj.bias : tensor<128xf32>
    %106 = hl.linear %103, %104, %105 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %107 = hl.dropout %106, %arg2, %arg3 p = 1.000000e-01 stream = 5 : tensor<16x64x128xf32>
    %108 = hl.add %82, %107 : tensor<16x64x128xf32>, tensor<16x64x128xf32>
    %109 = hl.get_param @blocks.2.ln2.weight : tensor<128xf32>
    %110 = hl.get_param @blocks.2.ln2.bias : tensor<128xf32>
    %111 = hl.layer_norm %108 weight %109 bias %110 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %112 = hl.get_param @blocks.2.mlp.fc.weight : tensor<512x128xf32>
    %113 = hl.get_param @blocks.2.mlp.fc.bias : tensor<512xf32>
    %114 = hl.linear %111, %112, %113 : tensor<16x64x128xf32>, tensor<512x128xf32>, tensor<512xf32>
    %115 = hl.gelu %114 : tensor<16x64x512xf32>
    %116 = hl.get_param @blocks.2.mlp.proj.weight : tensor<128x512xf32>
    %117 = hl.get_param @blocks.2.mlp.proj.bias : tensor<128xf32>
    %118 = hl.linear %115, %116, %117 : tensor<16x64x512xf32>, tensor<128x512xf32>, tensor<128xf32>
    %119 = hl.dropout %118, %arg2, %arg3 p = 1.000000e-01 stream = 6 : tensor<16x64x128xf32>
    %120 = hl.add %108, %119 : tensor<16x64x128xf32>, tensor<16x64x128xf32>
    %121 = hl.get_param @blocks.3.ln1.weight : tensor<128xf32>
    %122 = hl.get_param @blocks.3.ln1.bias : tensor<128xf32>
    %123 = hl.layer_norm %120 weight %121 bias %122 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %124 = hl.get_param @blocks.3.attn.q_proj.weight : tensor<128x128xf32>
    %125 = hl.get_param @blocks.3.attn.q_proj.bias : tensor<128xf32>
    %126 = hl.linear %123, %124, %125 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %127 = hl.reshape %126 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %128 = hl.transpose %127 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %129 = hl.get_param @blocks.3.attn.k_proj.weight : tensor<128x128xf32>
    %130 = hl.get_param @blocks.3.attn.k_proj.bias : tensor<128xf32>
    %131 = hl.linear %123, %129, %130 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %132 = hl.reshape %131 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %133 = hl.transpose %132 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %134 = hl.get_param @blocks.3.attn.v_proj.weight : tensor<128x128xf32>
    %135 = hl.get_param @blocks.3.attn.v_proj.bias : tensor<128xf32>
    %136 = hl.linear %123, %134, %135 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %137 = hl.reshape %136 : tensor<16x64x128xf32> to tensor<16x64x4x32xf32>
    %138 = hl.transpose %137 permutation = [0, 2, 1, 3] : tensor<16x64x4x32xf32>
    %139 = hl.attention %128, %133, %138 causal : tensor<16x4x64x32xf32>, tensor<16x4x64x32xf32>, tensor<16x4x64x32xf32>
    %140 = hl.transpose %139 permutation = [0, 2, 1, 3] : tensor<16x4x64x32xf32>
    %141 = hl.reshape %140 : tensor<16x64x4x32xf32> to tensor<16x64x128xf32>
    %142 = hl.get_param @blocks.3.attn.out_proj.weight : tensor<128x128xf32>
    %143 = hl.get_param @blocks.3.attn.out_proj.bias : tensor<128xf32>
    %144 = hl.linear %141, %142, %143 : tensor<16x64x128xf32>, tensor<128x128xf32>, tensor<128xf32>
    %145 = hl.dropout %144, %arg2, %arg3 p = 1.000000e-01 stream = 7 : tensor<16x64x128xf32>
    %146 = hl.add %120, %145 : tensor<16x64x128xf32>, tensor<16x64x128xf32>
    %147 = hl.get_param @blocks.3.ln2.weight : tensor<128xf32>
    %148 = hl.get_param @blocks.3.ln2.bias : tensor<128xf32>
    %149 = hl.layer_norm %146 weight %147 bias %148 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %150 = hl.get_param @blocks.3.mlp.fc.weight : tensor<512x128xf32>
    %151 = hl.get_param @blocks.3.mlp.fc.bias : tensor<512xf32>
    %152 = hl.linear %149, %150, %151 : tensor<16x64x128xf32>, tensor<512x128xf32>, tensor<512xf32>
    %153 = hl.gelu %152 : tensor<16x64x512xf32>
    %154 = hl.get_param @blocks.3.mlp.proj.weight : tensor<128x512xf32>
    %155 = hl.get_param @blocks.3.mlp.proj.bias : tensor<128xf32>
    %156 = hl.linear %153, %154, %155 : tensor<16x64x512xf32>, tensor<128x512xf32>, tensor<128xf32>
    %157 = hl.dropout %156, %arg2, %arg3 p = 1.000000e-01 stream = 8 : tensor<16x64x128xf32>
    %158 = hl.add %146, %157 : tensor<16x64x128xf32>, tensor<16x64x128xf32>
    %159 = hl.get_param @ln_f.weight : tensor<128xf32>
    %160 = hl.get_param @ln_f.bias : tensor<128xf32>
    %161 = hl.layer_norm %158 weight %159 bias %160 dims = 1 eps = 1.000000e-05 : tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>
    %162 = hl.get_param @lm_head.weight : tensor<65x128xf32>
    %163 = hl.linear %161, %162 : tensor<16x64x128xf32>, tensor<65x128xf32>
    %164 = hl.cross_entropy %163, %arg1 : tensor<16x64x65xf32>, tensor<16x64xi32>
    return %164 : tensor<f32>
  }
}
