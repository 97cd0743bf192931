// nanoGPT's shakespeare_char model (6 blocks, width 384, 6 heads, context 256,
// dropout 0.2, batch 64), built by examples/char_lm/model.rs at char_lm::NANOGPT:
//   cargo run -p aicf-compiler --example models -- nanogpt > examples/nanogpt/nanogpt.mlir
module {
  hl.param @tok_emb.weight : tensor<65x384xf32> owner "tok_emb" init <normal>
  hl.param @pos_emb.weight : tensor<256x384xf32> owner "pos_emb" init <normal>
  hl.param @blocks.0.ln1.weight : tensor<384xf32> owner "blocks.0.ln1" init <ones>
  hl.param @blocks.0.ln1.bias : tensor<384xf32> owner "blocks.0.ln1" init <zeros>
  hl.param @blocks.0.attn.q_proj.weight : tensor<384x384xf32> owner "blocks.0.attn.q_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.0.attn.q_proj.bias : tensor<384xf32> owner "blocks.0.attn.q_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.0.attn.k_proj.weight : tensor<384x384xf32> owner "blocks.0.attn.k_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.0.attn.k_proj.bias : tensor<384xf32> owner "blocks.0.attn.k_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.0.attn.v_proj.weight : tensor<384x384xf32> owner "blocks.0.attn.v_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.0.attn.v_proj.bias : tensor<384xf32> owner "blocks.0.attn.v_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.0.attn.out_proj.weight : tensor<384x384xf32> owner "blocks.0.attn.out_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.0.attn.out_proj.bias : tensor<384xf32> owner "blocks.0.attn.out_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.0.ln2.weight : tensor<384xf32> owner "blocks.0.ln2" init <ones>
  hl.param @blocks.0.ln2.bias : tensor<384xf32> owner "blocks.0.ln2" init <zeros>
  hl.param @blocks.0.mlp.fc.weight : tensor<1536x384xf32> owner "blocks.0.mlp.fc" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.0.mlp.fc.bias : tensor<1536xf32> owner "blocks.0.mlp.fc" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.0.mlp.proj.weight : tensor<384x1536xf32> owner "blocks.0.mlp.proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.0.mlp.proj.bias : tensor<384xf32> owner "blocks.0.mlp.proj" init <uniform, low = -0.025515518153991442, high = 0.025515518153991442>
  hl.param @blocks.1.ln1.weight : tensor<384xf32> owner "blocks.1.ln1" init <ones>
  hl.param @blocks.1.ln1.bias : tensor<384xf32> owner "blocks.1.ln1" init <zeros>
  hl.param @blocks.1.attn.q_proj.weight : tensor<384x384xf32> owner "blocks.1.attn.q_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.1.attn.q_proj.bias : tensor<384xf32> owner "blocks.1.attn.q_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.1.attn.k_proj.weight : tensor<384x384xf32> owner "blocks.1.attn.k_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.1.attn.k_proj.bias : tensor<384xf32> owner "blocks.1.attn.k_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.1.attn.v_proj.weight : tensor<384x384xf32> owner "blocks.1.attn.v_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.1.attn.v_proj.bias : tensor<384xf32> owner "blocks.1.attn.v_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.1.attn.out_proj.weight : tensor<384x384xf32> owner "blocks.1.attn.out_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.1.attn.out_proj.bias : tensor<384xf32> owner "blocks.1.attn.out_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.1.ln2.weight : tensor<384xf32> owner "blocks.1.ln2" init <ones>
  hl.param @blocks.1.ln2.bias : tensor<384xf32> owner "blocks.1.ln2" init <zeros>
  hl.param @blocks.1.mlp.fc.weight : tensor<1536x384xf32> owner "blocks.1.mlp.fc" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.1.mlp.fc.bias : tensor<1536xf32> owner "blocks.1.mlp.fc" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.1.mlp.proj.weight : tensor<384x1536xf32> owner "blocks.1.mlp.proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.1.mlp.proj.bias : tensor<384xf32> owner "blocks.1.mlp.proj" init <uniform, low = -0.025515518153991442, high = 0.025515518153991442>
  hl.param @blocks.2.ln1.weight : tensor<384xf32> owner "blocks.2.ln1" init <ones>
  hl.param @blocks.2.ln1.bias : tensor<384xf32> owner "blocks.2.ln1" init <zeros>
  hl.param @blocks.2.attn.q_proj.weight : tensor<384x384xf32> owner "blocks.2.attn.q_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.2.attn.q_proj.bias : tensor<384xf32> owner "blocks.2.attn.q_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.2.attn.k_proj.weight : tensor<384x384xf32> owner "blocks.2.attn.k_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.2.attn.k_proj.bias : tensor<384xf32> owner "blocks.2.attn.k_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.2.attn.v_proj.weight : tensor<384x384xf32> owner "blocks.2.attn.v_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.2.attn.v_proj.bias : tensor<384xf32> owner "blocks.2.attn.v_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.2.attn.out_proj.weight : tensor<384x384xf32> owner "blocks.2.attn.out_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.2.attn.out_proj.bias : tensor<384xf32> owner "blocks.2.attn.out_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.2.ln2.weight : tensor<384xf32> owner "blocks.2.ln2" init <ones>
  hl.param @blocks.2.ln2.bias : tensor<384xf32> owner "blocks.2.ln2" init <zeros>
  hl.param @blocks.2.mlp.fc.weight : tensor<1536x384xf32> owner "blocks.2.mlp.fc" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.2.mlp.fc.bias : tensor<1536xf32> owner "blocks.2.mlp.fc" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.2.mlp.proj.weight : tensor<384x1536xf32> owner "blocks.2.mlp.proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.2.mlp.proj.bias : tensor<384xf32> owner "blocks.2.mlp.proj" init <uniform, low = -0.025515518153991442, high = 0.025515518153991442>
  hl.param @blocks.3.ln1.weight : tensor<384xf32> owner "blocks.3.ln1" init <ones>
  hl.param @blocks.3.ln1.bias : tensor<384xf32> owner "blocks.3.ln1" init <zeros>
  hl.param @blocks.3.attn.q_proj.weight : tensor<384x384xf32> owner "blocks.3.attn.q_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.3.attn.q_proj.bias : tensor<384xf32> owner "blocks.3.attn.q_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.3.attn.k_proj.weight : tensor<384x384xf32> owner "blocks.3.attn.k_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.3.attn.k_proj.bias : tensor<384xf32> owner "blocks.3.attn.k_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.3.attn.v_proj.weight : tensor<384x384xf32> owner "blocks.3.attn.v_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.3.attn.v_proj.bias : tensor<384xf32> owner "blocks.3.attn.v_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.3.attn.out_proj.weight : tensor<384x384xf32> owner "blocks.3.attn.out_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.3.attn.out_proj.bias : tensor<384xf32> owner "blocks.3.attn.out_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.3.ln2.weight : tensor<384xf32> owner "blocks.3.ln2" init <ones>
  hl.param @blocks.3.ln2.bias : tensor<384xf32> owner "blocks.3.ln2" init <zeros>
  hl.param @blocks.3.mlp.fc.weight : tensor<1536x384xf32> owner "blocks.3.mlp.fc" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.3.mlp.fc.bias : tensor<1536xf32> owner "blocks.3.mlp.fc" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.3.mlp.proj.weight : tensor<384x1536xf32> owner "blocks.3.mlp.proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.3.mlp.proj.bias : tensor<384xf32> owner "blocks.3.mlp.proj" init <uniform, low = -0.025515518153991442, high = 0.025515518153991442>
  hl.param @blocks.4.ln1.weight : tensor<384xf32> owner "blocks.4.ln1" init <ones>
  hl.param @blocks.4.ln1.bias : tensor<384xf32> owner "blocks.4.ln1" init <zeros>
  hl.param @blocks.4.attn.q_proj.weight : tensor<384x384xf32> owner "blocks.4.attn.q_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.4.attn.q_proj.bias : tensor<384xf32> owner "blocks.4.attn.q_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.4.attn.k_proj.weight : tensor<384x384xf32> owner "blocks.4.attn.k_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.4.attn.k_proj.bias : tensor<384xf32> owner "blocks.4.attn.k_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.4.attn.v_proj.weight : tensor<384x384xf32> owner "blocks.4.attn.v_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.4.attn.v_proj.bias : tensor<384xf32> owner "blocks.4.attn.v_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.4.attn.out_proj.weight : tensor<384x384xf32> owner "blocks.4.attn.out_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.4.attn.out_proj.bias : tensor<384xf32> owner "blocks.4.attn.out_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.4.ln2.weight : tensor<384xf32> owner "blocks.4.ln2" init <ones>
  hl.param @blocks.4.ln2.bias : tensor<384xf32> owner "blocks.4.ln2" init <zeros>
  hl.param @blocks.4.mlp.fc.weight : tensor<1536x384xf32> owner "blocks.4.mlp.fc" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.4.mlp.fc.bias : tensor<1536xf32> owner "blocks.4.mlp.fc" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.4.mlp.proj.weight : tensor<384x1536xf32> owner "blocks.4.mlp.proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.4.mlp.proj.bias : tensor<384xf32> owner "blocks.4.mlp.proj" init <uniform, low = -0.025515518153991442, high = 0.025515518153991442>
  hl.param @blocks.5.ln1.weight : tensor<384xf32> owner "blocks.5.ln1" init <ones>
  hl.param @blocks.5.ln1.bias : tensor<384xf32> owner "blocks.5.ln1" init <zeros>
  hl.param @blocks.5.attn.q_proj.weight : tensor<384x384xf32> owner "blocks.5.attn.q_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.5.attn.q_proj.bias : tensor<384xf32> owner "blocks.5.attn.q_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.5.attn.k_proj.weight : tensor<384x384xf32> owner "blocks.5.attn.k_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.5.attn.k_proj.bias : tensor<384xf32> owner "blocks.5.attn.k_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.5.attn.v_proj.weight : tensor<384x384xf32> owner "blocks.5.attn.v_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.5.attn.v_proj.bias : tensor<384xf32> owner "blocks.5.attn.v_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.5.attn.out_proj.weight : tensor<384x384xf32> owner "blocks.5.attn.out_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.5.attn.out_proj.bias : tensor<384xf32> owner "blocks.5.attn.out_proj" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.5.ln2.weight : tensor<384xf32> owner "blocks.5.ln2" init <ones>
  hl.param @blocks.5.ln2.bias : tensor<384xf32> owner "blocks.5.ln2" init <zeros>
  hl.param @blocks.5.mlp.fc.weight : tensor<1536x384xf32> owner "blocks.5.mlp.fc" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.5.mlp.fc.bias : tensor<1536xf32> owner "blocks.5.mlp.fc" init <uniform, low = -0.051031036307982884, high = 0.051031036307982884>
  hl.param @blocks.5.mlp.proj.weight : tensor<384x1536xf32> owner "blocks.5.mlp.proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @blocks.5.mlp.proj.bias : tensor<384xf32> owner "blocks.5.mlp.proj" init <uniform, low = -0.025515518153991442, high = 0.025515518153991442>
  hl.param @ln_f.weight : tensor<384xf32> owner "ln_f" init <ones>
  hl.param @ln_f.bias : tensor<384xf32> owner "ln_f" init <zeros>
  hl.param @lm_head.weight : tensor<65x384xf32> owner "lm_head" init <kaiming_uniform, gain = 0.57735026918962573>
  func.func @forward(%arg0: tensor<64x256xi32>) -> tensor<64x256x65xf32> {
    %0 = hl.constant dense<"0x000000000100000002000000030000000400000005000000060000000700000008000000090000000A0000000B0000000C0000000D0000000E0000000F000000100000001100000012000000130000001400000015000000160000001700000018000000190000001A0000001B0000001C0000001D0000001E0000001F000000200000002100000022000000230000002400000025000000260000002700000028000000290000002A0000002B0000002C0000002D0000002E0000002F000000300000003100000032000000330000003400000035000000360000003700000038000000390000003A0000003B0000003C0000003D0000003E0000003F000000400000004100000042000000430000004400000045000000460000004700000048000000490000004A0000004B0000004C0000004D0000004E0000004F000000500000005100000052000000530000005400000055000000560000005700000058000000590000005A0000005B0000005C0000005D0000005E0000005F000000600000006100000062000000630000006400000065000000660000006700000068000000690000006A0000006B0000006C0000006D0000006E0000006F000000700000007100000072000000730000007400000075000000760000007700000078000000790000007A0000007B0000007C0000007D0000007E0000007F000000800000008100000082000000830000008400000085000000860000008700000088000000890000008A0000008B0000008C0000008D0000008E0000008F000000900000009100000092000000930000009400000095000000960000009700000098000000990000009A0000009B0000009C0000009D0000009E0000009F000000A0000000A1000000A2000000A3000000A4000000A5000000A6000000A7000000A8000000A9000000AA000000AB000000AC000000AD000000AE000000AF000000B0000000B1000000B2000000B3000000B4000000B5000000B6000000B7000000B8000000B9000000BA000000BB000000BC000000BD000000BE000000BF000000C0000000C1000000C2000000C3000000C4000000C5000000C6000000C7000000C8000000C9000000CA000000CB000000CC000000CD000000CE000000CF000000D0000000D1000000D2000000D3000000D4000000D5000000D6000000D7000000D8000000D9000000DA000000DB000000DC000000DD000000DE000000DF000000E0000000E1000000E2000000E3000000E4000000E5000000E6000000E7000000E8000000E9000000EA000000EB000000EC000000ED000000EE000000EF000000F0000000F1000000F2000000F3000000F4000000F5000000F6000000F7000000F8000000F9000000FA000000FB000000FC000000FD000000FE000000FF000000"> : tensor<256xi32>
    %1 = hl.get_param @tok_emb.weight : tensor<65x384xf32>
    %2 = hl.gather %1[%arg0] axis = 0 : tensor<65x384xf32>, tensor<64x256xi32>
    %3 = hl.get_param @pos_emb.weight : tensor<256x384xf32>
    %4 = hl.gather %3[%0] axis = 0 : tensor<256x384xf32>, tensor<256xi32>
    %5 = hl.add %2, %4 : tensor<64x256x384xf32>, tensor<256x384xf32>
    %6 = hl.get_param @blocks.0.ln1.weight : tensor<384xf32>
    %7 = hl.get_param @blocks.0.ln1.bias : tensor<384xf32>
    %8 = hl.layer_norm %5 weight %6 bias %7 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %9 = hl.get_param @blocks.0.attn.q_proj.weight : tensor<384x384xf32>
    %10 = hl.get_param @blocks.0.attn.q_proj.bias : tensor<384xf32>
    %11 = hl.linear %8, %9, %10 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %12 = hl.reshape %11 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %13 = hl.transpose %12 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %14 = hl.get_param @blocks.0.attn.k_proj.weight : tensor<384x384xf32>
    %15 = hl.get_param @blocks.0.attn.k_proj.bias : tensor<384xf32>
    %16 = hl.linear %8, %14, %15 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %17 = hl.reshape %16 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %18 = hl.transpose %17 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %19 = hl.get_param @blocks.0.attn.v_proj.weight : tensor<384x384xf32>
    %20 = hl.get_param @blocks.0.attn.v_proj.bias : tensor<384xf32>
    %21 = hl.linear %8, %19, %20 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %22 = hl.reshape %21 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %23 = hl.transpose %22 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %24 = hl.attention %13, %18, %23 causal : tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>
    %25 = hl.transpose %24 permutation = [0, 2, 1, 3] : tensor<64x6x256x64xf32>
    %26 = hl.reshape %25 : tensor<64x256x6x64xf32> to tensor<64x256x384xf32>
    %27 = hl.get_param @blocks.0.attn.out_proj.weight : tensor<384x384xf32>
    %28 = hl.get_param @blocks.0.attn.out_proj.bias : tensor<384xf32>
    %29 = hl.linear %26, %27, %28 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %30 = hl.add %5, %29 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %31 = hl.get_param @blocks.0.ln2.weight : tensor<384xf32>
    %32 = hl.get_param @blocks.0.ln2.bias : tensor<384xf32>
    %33 = hl.layer_norm %30 weight %31 bias %32 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %34 = hl.get_param @blocks.0.mlp.fc.weight : tensor<1536x384xf32>
    %35 = hl.get_param @blocks.0.mlp.fc.bias : tensor<1536xf32>
    %36 = hl.linear %33, %34, %35 : tensor<64x256x384xf32>, tensor<1536x384xf32>, tensor<1536xf32>
    %37 = hl.gelu %36 : tensor<64x256x1536xf32>
    %38 = hl.get_param @blocks.0.mlp.proj.weight : tensor<384x1536xf32>
    %39 = hl.get_param @blocks.0.mlp.proj.bias : tensor<384xf32>
    %40 = hl.linear %37, %38, %39 : tensor<64x256x1536xf32>, tensor<384x1536xf32>, tensor<384xf32>
    %41 = hl.add %30, %40 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %42 = hl.get_param @blocks.1.ln1.weight : tensor<384xf32>
    %43 = hl.get_param @blocks.1.ln1.bias : tensor<384xf32>
    %44 = hl.layer_norm %41 weight %42 bias %43 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %45 = hl.get_param @blocks.1.attn.q_proj.weight : tensor<384x384xf32>
    %46 = hl.get_param @blocks.1.attn.q_proj.bias : tensor<384xf32>
    %47 = hl.linear %44, %45, %46 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %48 = hl.reshape %47 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %49 = hl.transpose %48 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %50 = hl.get_param @blocks.1.attn.k_proj.weight : tensor<384x384xf32>
    %51 = hl.get_param @blocks.1.attn.k_proj.bias : tensor<384xf32>
    %52 = hl.linear %44, %50, %51 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %53 = hl.reshape %52 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %54 = hl.transpose %53 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %55 = hl.get_param @blocks.1.attn.v_proj.weight : tensor<384x384xf32>
    %56 = hl.get_param @blocks.1.attn.v_proj.bias : tensor<384xf32>
    %57 = hl.linear %44, %55, %56 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %58 = hl.reshape %57 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %59 = hl.transpose %58 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %60 = hl.attention %49, %54, %59 causal : tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>
    %61 = hl.transpose %60 permutation = [0, 2, 1, 3] : tensor<64x6x256x64xf32>
    %62 = hl.reshape %61 : tensor<64x256x6x64xf32> to tensor<64x256x384xf32>
    %63 = hl.get_param @blocks.1.attn.out_proj.weight : tensor<384x384xf32>
    %64 = hl.get_param @blocks.1.attn.out_proj.bias : tensor<384xf32>
    %65 = hl.linear %62, %63, %64 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %66 = hl.add %41, %65 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %67 = hl.get_param @blocks.1.ln2.weight : tensor<384xf32>
    %68 = hl.get_param @blocks.1.ln2.bias : tensor<384xf32>
    %69 = hl.layer_norm %66 weight %67 bias %68 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %70 = hl.get_param @blocks.1.mlp.fc.weight : tensor<1536x384xf32>
    %71 = hl.get_param @blocks.1.mlp.fc.bias : tensor<1536xf32>
    %72 = hl.linear %69, %70, %71 : tensor<64x256x384xf32>, tensor<1536x384xf32>, tensor<1536xf32>
    %73 = hl.gelu %72 : tensor<64x256x1536xf32>
    %74 = hl.get_param @blocks.1.mlp.proj.weight : tensor<384x1536xf32>
    %75 = hl.get_param @blocks.1.mlp.proj.bias : tensor<384xf32>
    %76 = hl.linear %73, %74, %75 : tensor<64x256x1536xf32>, tensor<384x1536xf32>, tensor<384xf32>
    %77 = hl.add %66, %76 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %78 = hl.get_param @blocks.2.ln1.weight : tensor<384xf32>
    %79 = hl.get_param @blocks.2.ln1.bias : tensor<384xf32>
    %80 = hl.layer_norm %77 weight %78 bias %79 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %81 = hl.get_param @blocks.2.attn.q_proj.weight : tensor<384x384xf32>
    %82 = hl.get_param @blocks.2.attn.q_proj.bias : tensor<384xf32>
    %83 = hl.linear %80, %81, %82 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %84 = hl.reshape %83 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %85 = hl.transpose %84 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %86 = hl.get_param @blocks.2.attn.k_proj.weight : tensor<384x384xf32>
    %87 = hl.get_param @blocks.2.attn.k_proj.bias : tensor<384xf32>
    %88 = hl.linear %80, %86, %87 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %89 = hl.reshape %88 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %90 = hl.transpose %89 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %91 = hl.get_param @blocks.2.attn.v_proj.weight : tensor<384x384xf32>
    %92 = hl.get_param @blocks.2.attn.v_proj.bias : tensor<384xf32>
    %93 = hl.linear %80, %91, %92 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %94 = hl.reshape %93 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %95 = hl.transpose %94 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %96 = hl.attention %85, %90, %95 causal : tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>
    %97 = hl.transpose %96 permutation = [0, 2, 1, 3] : tensor<64x6x256x64xf32>
    %98 = hl.reshape %97 : tensor<64x256x6x64xf32> to tensor<64x256x384xf32>
    %99 = hl.get_param @blocks.2.attn.out_proj.weight : tensor<384x384xf32>
    %100 = hl.get_param @blocks.2.attn.out_proj.bias : tensor<384xf32>
    %101 = hl.linear %98, %99, %100 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %102 = hl.add %77, %101 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %103 = hl.get_param @blocks.2.ln2.weight : tensor<384xf32>
    %104 = hl.get_param @blocks.2.ln2.bias : tensor<384xf32>
    %105 = hl.layer_norm %102 weight %103 bias %104 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %106 = hl.get_param @blocks.2.mlp.fc.weight : tensor<1536x384xf32>
    %107 = hl.get_param @blocks.2.mlp.fc.bias : tensor<1536xf32>
    %108 = hl.linear %105, %106, %107 : tensor<64x256x384xf32>, tensor<1536x384xf32>, tensor<1536xf32>
    %109 = hl.gelu %108 : tensor<64x256x1536xf32>
    %110 = hl.get_param @blocks.2.mlp.proj.weight : tensor<384x1536xf32>
    %111 = hl.get_param @blocks.2.mlp.proj.bias : tensor<384xf32>
    %112 = hl.linear %109, %110, %111 : tensor<64x256x1536xf32>, tensor<384x1536xf32>, tensor<384xf32>
    %113 = hl.add %102, %112 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %114 = hl.get_param @blocks.3.ln1.weight : tensor<384xf32>
    %115 = hl.get_param @blocks.3.ln1.bias : tensor<384xf32>
    %116 = hl.layer_norm %113 weight %114 bias %115 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %117 = hl.get_param @blocks.3.attn.q_proj.weight : tensor<384x384xf32>
    %118 = hl.get_param @blocks.3.attn.q_proj.bias : tensor<384xf32>
    %119 = hl.linear %116, %117, %118 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %120 = hl.reshape %119 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %121 = hl.transpose %120 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %122 = hl.get_param @blocks.3.attn.k_proj.weight : tensor<384x384xf32>
    %123 = hl.get_param @blocks.3.attn.k_proj.bias : tensor<384xf32>
    %124 = hl.linear %116, %122, %123 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %125 = hl.reshape %124 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %126 = hl.transpose %125 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %127 = hl.get_param @blocks.3.attn.v_proj.weight : tensor<384x384xf32>
    %128 = hl.get_param @blocks.3.attn.v_proj.bias : tensor<384xf32>
    %129 = hl.linear %116, %127, %128 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %130 = hl.reshape %129 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %131 = hl.transpose %130 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %132 = hl.attention %121, %126, %131 causal : tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>
    %133 = hl.transpose %132 permutation = [0, 2, 1, 3] : tensor<64x6x256x64xf32>
    %134 = hl.reshape %133 : tensor<64x256x6x64xf32> to tensor<64x256x384xf32>
    %135 = hl.get_param @blocks.3.attn.out_proj.weight : tensor<384x384xf32>
    %136 = hl.get_param @blocks.3.attn.out_proj.bias : tensor<384xf32>
    %137 = hl.linear %134, %135, %136 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %138 = hl.add %113, %137 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %139 = hl.get_param @blocks.3.ln2.weight : tensor<384xf32>
    %140 = hl.get_param @blocks.3.ln2.bias : tensor<384xf32>
    %141 = hl.layer_norm %138 weight %139 bias %140 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %142 = hl.get_param @blocks.3.mlp.fc.weight : tensor<1536x384xf32>
    %143 = hl.get_param @blocks.3.mlp.fc.bias : tensor<1536xf32>
    %144 = hl.linear %141, %142, %143 : tensor<64x256x384xf32>, tensor<1536x384xf32>, tensor<1536xf32>
    %145 = hl.gelu %144 : tensor<64x256x1536xf32>
    %146 = hl.get_param @blocks.3.mlp.proj.weight : tensor<384x1536xf32>
    %147 = hl.get_param @blocks.3.mlp.proj.bias : tensor<384xf32>
    %148 = hl.linear %145, %146, %147 : tensor<64x256x1536xf32>, tensor<384x1536xf32>, tensor<384xf32>
    %149 = hl.add %138, %148 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %150 = hl.get_param @blocks.4.ln1.weight : tensor<384xf32>
    %151 = hl.get_param @blocks.4.ln1.bias : tensor<384xf32>
    %152 = hl.layer_norm %149 weight %150 bias %151 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %153 = hl.get_param @blocks.4.attn.q_proj.weight : tensor<384x384xf32>
    %154 = hl.get_param @blocks.4.attn.q_proj.bias : tensor<384xf32>
    %155 = hl.linear %152, %153, %154 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %156 = hl.reshape %155 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %157 = hl.transpose %156 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %158 = hl.get_param @blocks.4.attn.k_proj.weight : tensor<384x384xf32>
    %159 = hl.get_param @blocks.4.attn.k_proj.bias : tensor<384xf32>
    %160 = hl.linear %152, %158, %159 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %161 = hl.reshape %160 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %162 = hl.transpose %161 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %163 = hl.get_param @blocks.4.attn.v_proj.weight : tensor<384x384xf32>
    %164 = hl.get_param @blocks.4.attn.v_proj.bias : tensor<384xf32>
    %165 = hl.linear %152, %163, %164 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %166 = hl.reshape %165 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %167 = hl.transpose %166 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %168 = hl.attention %157, %162, %167 causal : tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>
    %169 = hl.transpose %168 permutation = [0, 2, 1, 3] : tensor<64x6x256x64xf32>
    %170 = hl.reshape %169 : tensor<64x256x6x64xf32> to tensor<64x256x384xf32>
    %171 = hl.get_param @blocks.4.attn.out_proj.weight : tensor<384x384xf32>
    %172 = hl.get_param @blocks.4.attn.out_proj.bias : tensor<384xf32>
    %173 = hl.linear %170, %171, %172 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %174 = hl.add %149, %173 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %175 = hl.get_param @blocks.4.ln2.weight : tensor<384xf32>
    %176 = hl.get_param @blocks.4.ln2.bias : tensor<384xf32>
    %177 = hl.layer_norm %174 weight %175 bias %176 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %178 = hl.get_param @blocks.4.mlp.fc.weight : tensor<1536x384xf32>
    %179 = hl.get_param @blocks.4.mlp.fc.bias : tensor<1536xf32>
    %180 = hl.linear %177, %178, %179 : tensor<64x256x384xf32>, tensor<1536x384xf32>, tensor<1536xf32>
    %181 = hl.gelu %180 : tensor<64x256x1536xf32>
    %182 = hl.get_param @blocks.4.mlp.proj.weight : tensor<384x1536xf32>
    %183 = hl.get_param @blocks.4.mlp.proj.bias : tensor<384xf32>
    %184 = hl.linear %181, %182, %183 : tensor<64x256x1536xf32>, tensor<384x1536xf32>, tensor<384xf32>
    %185 = hl.add %174, %184 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %186 = hl.get_param @blocks.5.ln1.weight : tensor<384xf32>
    %187 = hl.get_param @blocks.5.ln1.bias : tensor<384xf32>
    %188 = hl.layer_norm %185 weight %186 bias %187 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %189 = hl.get_param @blocks.5.attn.q_proj.weight : tensor<384x384xf32>
    %190 = hl.get_param @blocks.5.attn.q_proj.bias : tensor<384xf32>
    %191 = hl.linear %188, %189, %190 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %192 = hl.reshape %191 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %193 = hl.transpose %192 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %194 = hl.get_param @blocks.5.attn.k_proj.weight : tensor<384x384xf32>
    %195 = hl.get_param @blocks.5.attn.k_proj.bias : tensor<384xf32>
    %196 = hl.linear %188, %194, %195 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %197 = hl.reshape %196 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %198 = hl.transpose %197 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %199 = hl.get_param @blocks.5.attn.v_proj.weight : tensor<384x384xf32>
    %200 = hl.get_param @blocks.5.attn.v_proj.bias : tensor<384xf32>
    %201 = hl.linear %188, %199, %200 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %202 = hl.reshape %201 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %203 = hl.transpose %202 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %204 = hl.attention %193, %198, %203 causal : tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>
    %205 = hl.transpose %204 permutation = [0, 2, 1, 3] : tensor<64x6x256x64xf32>
    %206 = hl.reshape %205 : tensor<64x256x6x64xf32> to tensor<64x256x384xf32>
    %207 = hl.get_param @blocks.5.attn.out_proj.weight : tensor<384x384xf32>
    %208 = hl.get_param @blocks.5.attn.out_proj.bias : tensor<384xf32>
    %209 = hl.linear %206, %207, %208 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %210 = hl.add %185, %209 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %211 = hl.get_param @blocks.5.ln2.weight : tensor<384xf32>
    %212 = hl.get_param @blocks.5.ln2.bias : tensor<384xf32>
    %213 = hl.layer_norm %210 weight %211 bias %212 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %214 = hl.get_param @blocks.5.mlp.fc.weight : tensor<1536x384xf32>
    %215 = hl.get_param @blocks.5.mlp.fc.bias : tensor<1536xf32>
    %216 = hl.linear %213, %214, %215 : tensor<64x256x384xf32>, tensor<1536x384xf32>, tensor<1536xf32>
    %217 = hl.gelu %216 : tensor<64x256x1536xf32>
    %218 = hl.get_param @blocks.5.mlp.proj.weight : tensor<384x1536xf32>
    %219 = hl.get_param @blocks.5.mlp.proj.bias : tensor<384xf32>
    %220 = hl.linear %217, %218, %219 : tensor<64x256x1536xf32>, tensor<384x1536xf32>, tensor<384xf32>
    %221 = hl.add %210, %220 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %222 = hl.get_param @ln_f.weight : tensor<384xf32>
    %223 = hl.get_param @ln_f.bias : tensor<384xf32>
    %224 = hl.layer_norm %221 weight %222 bias %223 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %225 = hl.get_param @lm_head.weight : tensor<65x384xf32>
    %226 = hl.linear %224, %225 : tensor<64x256x384xf32>, tensor<65x384xf32>
    return %226 : tensor<64x256x65xf32>
  }
  func.func @loss(%arg0: tensor<64x256xi32>, %arg1: tensor<64x256xi32>, %arg2: tensor<i64>, %arg3: tensor<i64>) -> tensor<f32> {
    %0 = hl.constant dense<"0x000000000100000002000000030000000400000005000000060000000700000008000000090000000A0000000B0000000C0000000D0000000E0000000F000000100000001100000012000000130000001400000015000000160000001700000018000000190000001A0000001B0000001C0000001D0000001E0000001F000000200000002100000022000000230000002400000025000000260000002700000028000000290000002A0000002B0000002C0000002D0000002E0000002F000000300000003100000032000000330000003400000035000000360000003700000038000000390000003A0000003B0000003C0000003D0000003E0000003F000000400000004100000042000000430000004400000045000000460000004700000048000000490000004A0000004B0000004C0000004D0000004E0000004F000000500000005100000052000000530000005400000055000000560000005700000058000000590000005A0000005B0000005C0000005D0000005E0000005F000000600000006100000062000000630000006400000065000000660000006700000068000000690000006A0000006B0000006C0000006D0000006E0000006F000000700000007100000072000000730000007400000075000000760000007700000078000000790000007A0000007B0000007C0000007D0000007E0000007F000000800000008100000082000000830000008400000085000000860000008700000088000000890000008A0000008B0000008C0000008D0000008E0000008F000000900000009100000092000000930000009400000095000000960000009700000098000000990000009A0000009B0000009C0000009D0000009E0000009F000000A0000000A1000000A2000000A3000000A4000000A5000000A6000000A7000000A8000000A9000000AA000000AB000000AC000000AD000000AE000000AF000000B0000000B1000000B2000000B3000000B4000000B5000000B6000000B7000000B8000000B9000000BA000000BB000000BC000000BD000000BE000000BF000000C0000000C1000000C2000000C3000000C4000000C5000000C6000000C7000000C8000000C9000000CA000000CB000000CC000000CD000000CE000000CF000000D0000000D1000000D2000000D3000000D4000000D5000000D6000000D7000000D8000000D9000000DA000000DB000000DC000000DD000000DE000000DF000000E0000000E1000000E2000000E3000000E4000000E5000000E6000000E7000000E8000000E9000000EA000000EB000000EC000000ED000000EE000000EF000000F0000000F1000000F2000000F3000000F4000000F5000000F6000000F7000000F8000000F9000000FA000000FB000000FC000000FD000000FE000000FF000000"> : tensor<256xi32>
    %1 = hl.get_param @tok_emb.weight : tensor<65x384xf32>
    %2 = hl.gather %1[%arg0] axis = 0 : tensor<65x384xf32>, tensor<64x256xi32>
    %3 = hl.get_param @pos_emb.weight : tensor<256x384xf32>
    %4 = hl.gather %3[%0] axis = 0 : tensor<256x384xf32>, tensor<256xi32>
    %5 = hl.add %2, %4 : tensor<64x256x384xf32>, tensor<256x384xf32>
    %6 = hl.dropout %5, %arg2, %arg3 p = 2.000000e-01 stream = 0 : tensor<64x256x384xf32>
    %7 = hl.get_param @blocks.0.ln1.weight : tensor<384xf32>
    %8 = hl.get_param @blocks.0.ln1.bias : tensor<384xf32>
    %9 = hl.layer_norm %6 weight %7 bias %8 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %10 = hl.get_param @blocks.0.attn.q_proj.weight : tensor<384x384xf32>
    %11 = hl.get_param @blocks.0.attn.q_proj.bias : tensor<384xf32>
    %12 = hl.linear %9, %10, %11 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %13 = hl.reshape %12 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %14 = hl.transpose %13 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %15 = hl.get_param @blocks.0.attn.k_proj.weight : tensor<384x384xf32>
    %16 = hl.get_param @blocks.0.attn.k_proj.bias : tensor<384xf32>
    %17 = hl.linear %9, %15, %16 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %18 = hl.reshape %17 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %19 = hl.transpose %18 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %20 = hl.get_param @blocks.0.attn.v_proj.weight : tensor<384x384xf32>
    %21 = hl.get_param @blocks.0.attn.v_proj.bias : tensor<384xf32>
    %22 = hl.linear %9, %20, %21 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %23 = hl.reshape %22 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %24 = hl.transpose %23 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %25 = hl.attention %14, %19, %24 causal : tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>
    %26 = hl.transpose %25 permutation = [0, 2, 1, 3] : tensor<64x6x256x64xf32>
    %27 = hl.reshape %26 : tensor<64x256x6x64xf32> to tensor<64x256x384xf32>
    %28 = hl.get_param @blocks.0.attn.out_proj.weight : tensor<384x384xf32>
    %29 = hl.get_param @blocks.0.attn.out_proj.bias : tensor<384xf32>
    %30 = hl.linear %27, %28, %29 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %31 = hl.dropout %30, %arg2, %arg3 p = 2.000000e-01 stream = 1 : tensor<64x256x384xf32>
    %32 = hl.add %6, %31 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %33 = hl.get_param @blocks.0.ln2.weight : tensor<384xf32>
    %34 = hl.get_param @blocks.0.ln2.bias : tensor<384xf32>
    %35 = hl.layer_norm %32 weight %33 bias %34 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %36 = hl.get_param @blocks.0.mlp.fc.weight : tensor<1536x384xf32>
    %37 = hl.get_param @blocks.0.mlp.fc.bias : tensor<1536xf32>
    %38 = hl.linear %35, %36, %37 : tensor<64x256x384xf32>, tensor<1536x384xf32>, tensor<1536xf32>
    %39 = hl.gelu %38 : tensor<64x256x1536xf32>
    %40 = hl.get_param @blocks.0.mlp.proj.weight : tensor<384x1536xf32>
    %41 = hl.get_param @blocks.0.mlp.proj.bias : tensor<384xf32>
    %42 = hl.linear %39, %40, %41 : tensor<64x256x1536xf32>, tensor<384x1536xf32>, tensor<384xf32>
    %43 = hl.dropout %42, %arg2, %arg3 p = 2.000000e-01 stream = 2 : tensor<64x256x384xf32>
    %44 = hl.add %32, %43 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %45 = hl.get_param @blocks.1.ln1.weight : tensor<384xf32>
    %46 = hl.get_param @blocks.1.ln1.bias : tensor<384xf32>
    %47 = hl.layer_norm %44 weight %45 bias %46 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %48 = hl.get_param @blocks.1.attn.q_proj.weight : tensor<384x384xf32>
    %49 = hl.get_param @blocks.1.attn.q_proj.bias : tensor<384xf32>
    %50 = hl.linear %47, %48, %49 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %51 = hl.reshape %50 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %52 = hl.transpose %51 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %53 = hl.get_param @blocks.1.attn.k_proj.weight : tensor<384x384xf32>
    %54 = hl.get_param @blocks.1.attn.k_proj.bias : tensor<384xf32>
    %55 = hl.linear %47, %53, %54 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %56 = hl.reshape %55 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %57 = hl.transpose %56 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %58 = hl.get_param @blocks.1.attn.v_proj.weight : tensor<384x384xf32>
    %59 = hl.get_param @blocks.1.attn.v_proj.bias : tensor<384xf32>
    %60 = hl.linear %47, %58, %59 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %61 = hl.reshape %60 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %62 = hl.transpose %61 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %63 = hl.attention %52, %57, %62 causal : tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>
    %64 = hl.transpose %63 permutation = [0, 2, 1, 3] : tensor<64x6x256x64xf32>
    %65 = hl.reshape %64 : tensor<64x256x6x64xf32> to tensor<64x256x384xf32>
    %66 = hl.get_param @blocks.1.attn.out_proj.weight : tensor<384x384xf32>
    %67 = hl.get_param @blocks.1.attn.out_proj.bias : tensor<384xf32>
    %68 = hl.linear %65, %66, %67 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %69 = hl.dropout %68, %arg2, %arg3 p = 2.000000e-01 stream = 3 : tensor<64x256x384xf32>
    %70 = hl.add %44, %69 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %71 = hl.get_param @blocks.1.ln2.weight : tensor<384xf32>
    %72 = hl.get_param @blocks.1.ln2.bias : tensor<384xf32>
    %73 = hl.layer_norm %70 weight %71 bias %72 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %74 = hl.get_param @blocks.1.mlp.fc.weight : tensor<1536x384xf32>
    %75 = hl.get_param @blocks.1.mlp.fc.bias : tensor<1536xf32>
    %76 = hl.linear %73, %74, %75 : tensor<64x256x384xf32>, tensor<1536x384xf32>, tensor<1536xf32>
    %77 = hl.gelu %76 : tensor<64x256x1536xf32>
    %78 = hl.get_param @blocks.1.mlp.proj.weight : tensor<384x1536xf32>
    %79 = hl.get_param @blocks.1.mlp.proj.bias : tensor<384xf32>
    %80 = hl.linear %77, %78, %79 : tensor<64x256x1536xf32>, tensor<384x1536xf32>, tensor<384xf32>
    %81 = hl.dropout %80, %arg2, %arg3 p = 2.000000e-01 stream = 4 : tensor<64x256x384xf32>
    %82 = hl.add %70, %81 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %83 = hl.get_param @blocks.2.ln1.weight : tensor<384xf32>
    %84 = hl.get_param @blocks.2.ln1.bias : tensor<384xf32>
    %85 = hl.layer_norm %82 weight %83 bias %84 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %86 = hl.get_param @blocks.2.attn.q_proj.weight : tensor<384x384xf32>
    %87 = hl.get_param @blocks.2.attn.q_proj.bias : tensor<384xf32>
    %88 = hl.linear %85, %86, %87 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %89 = hl.reshape %88 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %90 = hl.transpose %89 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %91 = hl.get_param @blocks.2.attn.k_proj.weight : tensor<384x384xf32>
    %92 = hl.get_param @blocks.2.attn.k_proj.bias : tensor<384xf32>
    %93 = hl.linear %85, %91, %92 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %94 = hl.reshape %93 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %95 = hl.transpose %94 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %96 = hl.get_param @blocks.2.attn.v_proj.weight : tensor<384x384xf32>
    %97 = hl.get_param @blocks.2.attn.v_proj.bias : tensor<384xf32>
    %98 = hl.linear %85, %96, %97 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %99 = hl.reshape %98 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %100 = hl.transpose %99 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %101 = hl.attention %90, %95, %100 causal : tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>
    %102 = hl.transpose %101 permutation = [0, 2, 1, 3] : tensor<64x6x256x64xf32>
    %103 = hl.reshape %102 : tensor<64x256x6x64xf32> to tensor<64x256x384xf32>
    %104 = hl.get_param @blocks.2.attn.out_proj.weight : tensor<384x384xf32>
    %105 = hl.get_param @blocks.2.attn.out_proj.bias : tensor<384xf32>
    %106 = hl.linear %103, %104, %105 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %107 = hl.dropout %106, %arg2, %arg3 p = 2.000000e-01 stream = 5 : tensor<64x256x384xf32>
    %108 = hl.add %82, %107 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %109 = hl.get_param @blocks.2.ln2.weight : tensor<384xf32>
    %110 = hl.get_param @blocks.2.ln2.bias : tensor<384xf32>
    %111 = hl.layer_norm %108 weight %109 bias %110 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %112 = hl.get_param @blocks.2.mlp.fc.weight : tensor<1536x384xf32>
    %113 = hl.get_param @blocks.2.mlp.fc.bias : tensor<1536xf32>
    %114 = hl.linear %111, %112, %113 : tensor<64x256x384xf32>, tensor<1536x384xf32>, tensor<1536xf32>
    %115 = hl.gelu %114 : tensor<64x256x1536xf32>
    %116 = hl.get_param @blocks.2.mlp.proj.weight : tensor<384x1536xf32>
    %117 = hl.get_param @blocks.2.mlp.proj.bias : tensor<384xf32>
    %118 = hl.linear %115, %116, %117 : tensor<64x256x1536xf32>, tensor<384x1536xf32>, tensor<384xf32>
    %119 = hl.dropout %118, %arg2, %arg3 p = 2.000000e-01 stream = 6 : tensor<64x256x384xf32>
    %120 = hl.add %108, %119 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %121 = hl.get_param @blocks.3.ln1.weight : tensor<384xf32>
    %122 = hl.get_param @blocks.3.ln1.bias : tensor<384xf32>
    %123 = hl.layer_norm %120 weight %121 bias %122 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %124 = hl.get_param @blocks.3.attn.q_proj.weight : tensor<384x384xf32>
    %125 = hl.get_param @blocks.3.attn.q_proj.bias : tensor<384xf32>
    %126 = hl.linear %123, %124, %125 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %127 = hl.reshape %126 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %128 = hl.transpose %127 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %129 = hl.get_param @blocks.3.attn.k_proj.weight : tensor<384x384xf32>
    %130 = hl.get_param @blocks.3.attn.k_proj.bias : tensor<384xf32>
    %131 = hl.linear %123, %129, %130 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %132 = hl.reshape %131 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %133 = hl.transpose %132 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %134 = hl.get_param @blocks.3.attn.v_proj.weight : tensor<384x384xf32>
    %135 = hl.get_param @blocks.3.attn.v_proj.bias : tensor<384xf32>
    %136 = hl.linear %123, %134, %135 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %137 = hl.reshape %136 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %138 = hl.transpose %137 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %139 = hl.attention %128, %133, %138 causal : tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>
    %140 = hl.transpose %139 permutation = [0, 2, 1, 3] : tensor<64x6x256x64xf32>
    %141 = hl.reshape %140 : tensor<64x256x6x64xf32> to tensor<64x256x384xf32>
    %142 = hl.get_param @blocks.3.attn.out_proj.weight : tensor<384x384xf32>
    %143 = hl.get_param @blocks.3.attn.out_proj.bias : tensor<384xf32>
    %144 = hl.linear %141, %142, %143 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %145 = hl.dropout %144, %arg2, %arg3 p = 2.000000e-01 stream = 7 : tensor<64x256x384xf32>
    %146 = hl.add %120, %145 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %147 = hl.get_param @blocks.3.ln2.weight : tensor<384xf32>
    %148 = hl.get_param @blocks.3.ln2.bias : tensor<384xf32>
    %149 = hl.layer_norm %146 weight %147 bias %148 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %150 = hl.get_param @blocks.3.mlp.fc.weight : tensor<1536x384xf32>
    %151 = hl.get_param @blocks.3.mlp.fc.bias : tensor<1536xf32>
    %152 = hl.linear %149, %150, %151 : tensor<64x256x384xf32>, tensor<1536x384xf32>, tensor<1536xf32>
    %153 = hl.gelu %152 : tensor<64x256x1536xf32>
    %154 = hl.get_param @blocks.3.mlp.proj.weight : tensor<384x1536xf32>
    %155 = hl.get_param @blocks.3.mlp.proj.bias : tensor<384xf32>
    %156 = hl.linear %153, %154, %155 : tensor<64x256x1536xf32>, tensor<384x1536xf32>, tensor<384xf32>
    %157 = hl.dropout %156, %arg2, %arg3 p = 2.000000e-01 stream = 8 : tensor<64x256x384xf32>
    %158 = hl.add %146, %157 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %159 = hl.get_param @blocks.4.ln1.weight : tensor<384xf32>
    %160 = hl.get_param @blocks.4.ln1.bias : tensor<384xf32>
    %161 = hl.layer_norm %158 weight %159 bias %160 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %162 = hl.get_param @blocks.4.attn.q_proj.weight : tensor<384x384xf32>
    %163 = hl.get_param @blocks.4.attn.q_proj.bias : tensor<384xf32>
    %164 = hl.linear %161, %162, %163 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %165 = hl.reshape %164 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %166 = hl.transpose %165 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %167 = hl.get_param @blocks.4.attn.k_proj.weight : tensor<384x384xf32>
    %168 = hl.get_param @blocks.4.attn.k_proj.bias : tensor<384xf32>
    %169 = hl.linear %161, %167, %168 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %170 = hl.reshape %169 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %171 = hl.transpose %170 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %172 = hl.get_param @blocks.4.attn.v_proj.weight : tensor<384x384xf32>
    %173 = hl.get_param @blocks.4.attn.v_proj.bias : tensor<384xf32>
    %174 = hl.linear %161, %172, %173 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %175 = hl.reshape %174 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %176 = hl.transpose %175 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %177 = hl.attention %166, %171, %176 causal : tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>
    %178 = hl.transpose %177 permutation = [0, 2, 1, 3] : tensor<64x6x256x64xf32>
    %179 = hl.reshape %178 : tensor<64x256x6x64xf32> to tensor<64x256x384xf32>
    %180 = hl.get_param @blocks.4.attn.out_proj.weight : tensor<384x384xf32>
    %181 = hl.get_param @blocks.4.attn.out_proj.bias : tensor<384xf32>
    %182 = hl.linear %179, %180, %181 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %183 = hl.dropout %182, %arg2, %arg3 p = 2.000000e-01 stream = 9 : tensor<64x256x384xf32>
    %184 = hl.add %158, %183 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %185 = hl.get_param @blocks.4.ln2.weight : tensor<384xf32>
    %186 = hl.get_param @blocks.4.ln2.bias : tensor<384xf32>
    %187 = hl.layer_norm %184 weight %185 bias %186 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %188 = hl.get_param @blocks.4.mlp.fc.weight : tensor<1536x384xf32>
    %189 = hl.get_param @blocks.4.mlp.fc.bias : tensor<1536xf32>
    %190 = hl.linear %187, %188, %189 : tensor<64x256x384xf32>, tensor<1536x384xf32>, tensor<1536xf32>
    %191 = hl.gelu %190 : tensor<64x256x1536xf32>
    %192 = hl.get_param @blocks.4.mlp.proj.weight : tensor<384x1536xf32>
    %193 = hl.get_param @blocks.4.mlp.proj.bias : tensor<384xf32>
    %194 = hl.linear %191, %192, %193 : tensor<64x256x1536xf32>, tensor<384x1536xf32>, tensor<384xf32>
    %195 = hl.dropout %194, %arg2, %arg3 p = 2.000000e-01 stream = 10 : tensor<64x256x384xf32>
    %196 = hl.add %184, %195 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %197 = hl.get_param @blocks.5.ln1.weight : tensor<384xf32>
    %198 = hl.get_param @blocks.5.ln1.bias : tensor<384xf32>
    %199 = hl.layer_norm %196 weight %197 bias %198 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %200 = hl.get_param @blocks.5.attn.q_proj.weight : tensor<384x384xf32>
    %201 = hl.get_param @blocks.5.attn.q_proj.bias : tensor<384xf32>
    %202 = hl.linear %199, %200, %201 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %203 = hl.reshape %202 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %204 = hl.transpose %203 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %205 = hl.get_param @blocks.5.attn.k_proj.weight : tensor<384x384xf32>
    %206 = hl.get_param @blocks.5.attn.k_proj.bias : tensor<384xf32>
    %207 = hl.linear %199, %205, %206 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %208 = hl.reshape %207 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %209 = hl.transpose %208 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %210 = hl.get_param @blocks.5.attn.v_proj.weight : tensor<384x384xf32>
    %211 = hl.get_param @blocks.5.attn.v_proj.bias : tensor<384xf32>
    %212 = hl.linear %199, %210, %211 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %213 = hl.reshape %212 : tensor<64x256x384xf32> to tensor<64x256x6x64xf32>
    %214 = hl.transpose %213 permutation = [0, 2, 1, 3] : tensor<64x256x6x64xf32>
    %215 = hl.attention %204, %209, %214 causal : tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>, tensor<64x6x256x64xf32>
    %216 = hl.transpose %215 permutation = [0, 2, 1, 3] : tensor<64x6x256x64xf32>
    %217 = hl.reshape %216 : tensor<64x256x6x64xf32> to tensor<64x256x384xf32>
    %218 = hl.get_param @blocks.5.attn.out_proj.weight : tensor<384x384xf32>
    %219 = hl.get_param @blocks.5.attn.out_proj.bias : tensor<384xf32>
    %220 = hl.linear %217, %218, %219 : tensor<64x256x384xf32>, tensor<384x384xf32>, tensor<384xf32>
    %221 = hl.dropout %220, %arg2, %arg3 p = 2.000000e-01 stream = 11 : tensor<64x256x384xf32>
    %222 = hl.add %196, %221 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %223 = hl.get_param @blocks.5.ln2.weight : tensor<384xf32>
    %224 = hl.get_param @blocks.5.ln2.bias : tensor<384xf32>
    %225 = hl.layer_norm %222 weight %223 bias %224 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %226 = hl.get_param @blocks.5.mlp.fc.weight : tensor<1536x384xf32>
    %227 = hl.get_param @blocks.5.mlp.fc.bias : tensor<1536xf32>
    %228 = hl.linear %225, %226, %227 : tensor<64x256x384xf32>, tensor<1536x384xf32>, tensor<1536xf32>
    %229 = hl.gelu %228 : tensor<64x256x1536xf32>
    %230 = hl.get_param @blocks.5.mlp.proj.weight : tensor<384x1536xf32>
    %231 = hl.get_param @blocks.5.mlp.proj.bias : tensor<384xf32>
    %232 = hl.linear %229, %230, %231 : tensor<64x256x1536xf32>, tensor<384x1536xf32>, tensor<384xf32>
    %233 = hl.dropout %232, %arg2, %arg3 p = 2.000000e-01 stream = 12 : tensor<64x256x384xf32>
    %234 = hl.add %222, %233 : tensor<64x256x384xf32>, tensor<64x256x384xf32>
    %235 = hl.get_param @ln_f.weight : tensor<384xf32>
    %236 = hl.get_param @ln_f.bias : tensor<384xf32>
    %237 = hl.layer_norm %234 weight %235 bias %236 dims = 1 eps = 1.000000e-05 : tensor<64x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    %238 = hl.get_param @lm_head.weight : tensor<65x384xf32>
    %239 = hl.linear %237, %238 : tensor<64x256x384xf32>, tensor<65x384xf32>
    %240 = hl.cross_entropy %239, %arg1 : tensor<64x256x65xf32>, tensor<64x256xi32>
    return %240 : tensor<f32>
  }
}
