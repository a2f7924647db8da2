import { defineConfig } from "vitest/config";

// The Tauri CLI expects the dev server on a fixed port (tauri.conf.json `build.devUrl`).
export default defineConfig({
  clearScreen: false,
  server: { port: 5173, strictPort: true },
  build: { target: "safari15", outDir: "dist", emptyOutDir: true },
  test: {
    environment: "happy-dom",
    include: ["src/**/*.test.ts"],
    // Vitest hands tests an empty string for CSS unless told: the style checks read the real
    // style.css (src/contrast.test.ts, src/scale.test.ts).
    css: { include: [/style\.css/] },
  },
});
