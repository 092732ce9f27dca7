package org.hudisink.reader;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import org.apache.avro.LogicalType;
import org.apache.avro.LogicalTypes;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericFixed;
import org.apache.avro.generic.IndexedRecord;
import org.apache.hadoop.conf.Configuration;
import org.apache.hudi.BaseHoodieTableFileIndex;
import org.apache.hudi.common.config.HoodieConfig;
import org.apache.hudi.common.config.TypedProperties;
import org.apache.hudi.common.engine.HoodieLocalEngineContext;
import org.apache.hudi.common.model.FileSlice;
import org.apache.hudi.common.model.HoodieBaseFile;
import org.apache.hudi.common.model.HoodieRecord.HoodieRecordType;
import org.apache.hudi.common.model.HoodieTableQueryType;
import org.apache.hudi.common.table.HoodieTableMetaClient;
import org.apache.hudi.common.table.TableSchemaResolver;
import org.apache.hudi.common.table.timeline.HoodieInstant;
import org.apache.hudi.common.util.Option;
import org.apache.hudi.common.util.collection.ClosableIterator;
import org.apache.hudi.hadoop.fs.HadoopFSUtils;
import org.apache.hudi.io.storage.HoodieAvroFileReader;
import org.apache.hudi.io.storage.HoodieIOFactory;
import org.apache.hudi.storage.StorageConfiguration;
import org.apache.hudi.storage.StoragePath;

/**
 * Reads hudi-sink's tables with Apache Hudi's own Java libraries, as a Spark or Hive query
 * would: {@link BaseHoodieTableFileIndex} (the file index Spark's and Hive's Hudi readers
 * extend) picks the latest base file of every file group from the completed timeline, hides
 * file groups a completed replacecommit replaced and, for a time-travel read, applies Hudi's
 * own as-of rules; the rows come from Hudi's Avro Parquet reader with the table schema of the
 * commit metadata as of the query's instant ({@link TableSchemaResolver}).
 *
 * <p>Several reads per JVM (its start is most of the cost): each argument is one JSON request
 * {@code {"base_path": ..., "as_of": ..., "columns": [...], "conf": {...}}} ({@code as_of},
 * {@code columns} and {@code conf}, Hadoop settings such as {@code fs.s3a.endpoint}, are
 * optional). For each request stdout gets one header line {@code {"read": i, "columns": [...],
 * "query_instant": ..., "files": [...]}} and then one line per row, a JSON array in column
 * order (rows are streamed, never held). Values: strings, numbers, booleans and null as JSON;
 * timestamps as epoch microseconds, dates as epoch days, decimals as plain strings, bytes as
 * base64, records as objects, arrays as arrays, maps as objects. Any failure exits 1 with the
 * error on stderr.
 */
public final class HudiReader {

  private static final ObjectMapper JSON = new ObjectMapper();

  private HudiReader() {
  }

  public static void main(String[] args) throws Exception {
    OutputStream out = new BufferedOutputStream(System.out, 1 << 16);
    try (JsonGenerator json = JSON.getFactory().createGenerator(out, JsonEncoding.UTF8)) {
      json.setRootValueSeparator(null);
      for (int i = 0; i < args.length; i++) {
        read(i, JSON.readTree(args[i]), json);
      }
    } catch (Exception e) {
      System.err.println("hudi-reader: " + e);
      e.printStackTrace(System.err);
      System.err.flush();
      System.exit(1);
    }
    out.flush();
    // Hadoop's and Hudi's thread pools must not keep the JVM alive.
    System.exit(0);
  }

  private static void read(int index, JsonNode request, JsonGenerator json) throws Exception {
    String basePath = request.path("base_path").asText();
    if (basePath.isEmpty()) {
      throw new IllegalArgumentException("request " + index + " has no base_path: " + request);
    }
    Option<String> asOf = request.hasNonNull("as_of")
        ? Option.of(request.get("as_of").asText()) : Option.empty();
    Configuration hadoopConf = new Configuration();
    request.path("conf").fields().forEachRemaining(e -> hadoopConf.set(e.getKey(), e.getValue().asText()));
    StorageConfiguration<Configuration> conf = HadoopFSUtils.getStorageConf(hadoopConf);
    HoodieTableMetaClient metaClient = HoodieTableMetaClient.builder()
        .setConf(conf).setBasePath(basePath).build();
    HoodieLocalEngineContext engine = new HoodieLocalEngineContext(conf);

    List<FileSlice> slices = new ArrayList<>();
    String queryInstant;
    try (SnapshotIndex fileIndex = new SnapshotIndex(engine, metaClient, asOf)) {
      fileIndex.slices().forEach(slices::addAll);
      queryInstant = asOf.orElseGet(() -> fileIndex.getLatestCompletedInstant()
          .map(HoodieInstant::requestedTime).orElse(null));
    }
    // A table without a completed commit has no schema yet, and no rows.
    Schema schema = queryInstant == null
        ? Schema.createRecord("empty", null, null, false, List.of())
        : project(new TableSchemaResolver(metaClient).getTableAvroSchema(queryInstant),
            request.path("columns"));

    List<StoragePath> files = new ArrayList<>();
    for (FileSlice slice : slices) {
      if (slice.hasLogFiles()) {
        throw new IllegalStateException("log files in a Copy-on-Write table: " + slice);
      }
      Option<HoodieBaseFile> base = slice.getBaseFile();
      if (base.isPresent()) {
        files.add(base.get().getStoragePath());
      }
    }
    files.sort(null);

    json.writeStartObject();
    json.writeNumberField("read", index);
    json.writeStringField("query_instant", queryInstant);
    json.writeArrayFieldStart("columns");
    for (Schema.Field field : schema.getFields()) {
      json.writeString(field.name());
    }
    json.writeEndArray();
    json.writeArrayFieldStart("files");
    for (StoragePath file : files) {
      json.writeString(file.toString());
    }
    json.writeEndArray();
    json.writeEndObject();
    json.writeRaw('\n');

    HoodieIOFactory io = HoodieIOFactory.getIOFactory(metaClient.getStorage());
    for (StoragePath file : files) {
      try (HoodieAvroFileReader reader = (HoodieAvroFileReader) io.getReaderFactory(HoodieRecordType.AVRO)
          .getFileReader(new HoodieConfig(), file);
           ClosableIterator<IndexedRecord> records = reader.getIndexedRecordIterator(schema, schema)) {
        while (records.hasNext()) {
          IndexedRecord row = records.next();
          json.writeStartArray();
          for (Schema.Field field : schema.getFields()) {
            write(json, row.get(field.pos()), field.schema());
          }
          json.writeEndArray();
          json.writeRaw('\n');
        }
      }
    }
  }

  private static Schema project(Schema schema, JsonNode columns) {
    if (!columns.isArray() || columns.isEmpty()) {
      return schema;
    }
    List<Schema.Field> fields = new ArrayList<>();
    for (JsonNode column : columns) {
      Schema.Field field = schema.getField(column.asText());
      if (field == null) {
        throw new IllegalArgumentException("no column " + column + " in the table schema " + schema);
      }
      fields.add(new Schema.Field(field, field.schema()));
    }
    return Schema.createRecord(schema.getName(), schema.getDoc(), schema.getNamespace(), false, fields);
  }

  private static void write(JsonGenerator json, Object value, Schema schema) throws IOException {
    if (value == null) {
      json.writeNull();
      return;
    }
    if (schema.getType() == Schema.Type.UNION) {
      write(json, value, schema.getTypes().get(GenericData.get().resolveUnion(schema, value)));
      return;
    }
    LogicalType logical = schema.getLogicalType();
    switch (schema.getType()) {
      case STRING:
      case ENUM:
        json.writeString(value.toString());
        return;
      case BOOLEAN:
        json.writeBoolean((Boolean) value);
        return;
      case INT:
        json.writeNumber((Integer) value);
        return;
      case LONG:
        long number = (Long) value;
        if (logical instanceof LogicalTypes.TimestampMillis
            || logical instanceof LogicalTypes.LocalTimestampMillis) {
          number = Math.multiplyExact(number, 1000L);
        }
        json.writeNumber(number);
        return;
      case FLOAT:
        json.writeNumber((double) (Float) value);
        return;
      case DOUBLE:
        json.writeNumber((Double) value);
        return;
      case BYTES:
      case FIXED:
        byte[] bytes = value instanceof GenericFixed
            ? ((GenericFixed) value).bytes() : toArray((ByteBuffer) value);
        if (logical instanceof LogicalTypes.Decimal) {
          int scale = ((LogicalTypes.Decimal) logical).getScale();
          json.writeString(new BigDecimal(new BigInteger(bytes), scale).toPlainString());
        } else {
          json.writeString(Base64.getEncoder().encodeToString(bytes));
        }
        return;
      case RECORD:
        IndexedRecord record = (IndexedRecord) value;
        json.writeStartObject();
        for (Schema.Field field : schema.getFields()) {
          json.writeFieldName(field.name());
          write(json, record.get(field.pos()), field.schema());
        }
        json.writeEndObject();
        return;
      case ARRAY:
        json.writeStartArray();
        for (Object element : (Collection<?>) value) {
          write(json, element, schema.getElementType());
        }
        json.writeEndArray();
        return;
      case MAP:
        json.writeStartObject();
        for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
          json.writeFieldName(entry.getKey().toString());
          write(json, entry.getValue(), schema.getValueType());
        }
        json.writeEndObject();
        return;
      default:
        throw new IllegalArgumentException("unsupported Avro type " + schema + " for value " + value);
    }
  }

  private static byte[] toArray(ByteBuffer buffer) {
    byte[] bytes = new byte[buffer.remaining()];
    buffer.duplicate().get(bytes);
    return bytes;
  }

  /** A snapshot (or as-of) query's file index, as Spark and Hive build theirs: completed
   * timeline, listing from the metadata table when the table has one, eager listing. */
  private static final class SnapshotIndex extends BaseHoodieTableFileIndex {
    SnapshotIndex(HoodieLocalEngineContext engine, HoodieTableMetaClient metaClient, Option<String> asOf) {
      super(engine, metaClient, new TypedProperties(), HoodieTableQueryType.SNAPSHOT,
          List.of(metaClient.getBasePath()), asOf, false, false, new NoopCache(), false,
          Option.empty(), Option.empty());
    }

    Collection<List<FileSlice>> slices() {
      return getAllInputFileSlices().values();
    }

    @Override
    protected Object[] parsePartitionColumnValues(String[] partitionColumns, String partitionPath) {
      // Values are only used for partition pruning, which these reads never ask for; returning
      // none makes the index list the table as Spark does when it cannot parse a path.
      return new Object[0];
    }
  }
}
